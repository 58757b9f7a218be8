#!/usr/bin/env bash
# fid.sh (device, ~4 min): (1) the bf16-weight prefill GEMM on a TRAINED model: models/demo over its
# 1,100 held-out tokens, `lily ppl --backend cuda` with the exact (folding) GEMM and with
# LILY_CUDA_QG_BF16W=1, each against HF fp32 (tests/fixtures/demo-fidelity/hf_ref.json: top-1, ppl,
# per-position nll) and against the CPU backend's logits (--ref-logits: KL, logit error);
# (2) `lily-gpu-test pfprof /tmp/big 4K` with the chunked GDN's phase A and B apart, both GEMM modes;
# (3) Nsight Compute of the two chunked-GDN kernels at T = 4096 (first layer of a 4K prefill).
. .carry/common.sh; synth_bg; safe_start 500
F=tests/fixtures/demo-fidelity; IDS=$(tr -s ' \n' ',' < $F/ids.txt | sed 's/,$//')
timeout 120 $B/lily logits --model models/demo --ids "$IDS" --backend cpu --out /tmp/cpu.f32 > $L/cpu.txt 2>&1; el "cpu logits rc=$?"
for m in 0 1 0 1; do
  LILY_CUDA_QG_BF16W=$m timeout 60 $B/lily ppl --model models/demo --tokens $F/ids.txt --backend cuda --ref-logits /tmp/cpu.f32 --json $L/ppl_bw$m.json > $L/ppl_bw$m.txt 2>&1
  echo "bf16w=$m rc=$?: $(tail -4 $L/ppl_bw$m.txt | tr '\n' ' ' | cut -c1-400)"
done
python3 - <<'PY'
import json
ref = json.load(open("tests/fixtures/demo-fidelity/hf_ref.json"))
for m in (0, 1):
    r = json.load(open(f"/tmp/logs/ppl_bw{m}.json")); pos = r["positions"]
    agree = sum(p["top1"] == t for p, t in zip(pos, ref["top1"]))
    dec = [i for i, mg in enumerate(ref["margin"]) if mg > 1e-3]
    lost = sum(pos[i]["top1"] != ref["top1"][i] for i in dec)
    dn = [abs(p["nll"] - x) for p, x in zip(pos, ref["nll"])]
    print(f"vs HF fp32: bf16w={m} ppl {r['ppl']:.4f} (HF {ref['ppl']:.4f}, rel {abs(r['ppl']-ref['ppl'])/ref['ppl']:.2e}) top-1 {agree}/{len(pos)} lost-decisive {lost}/{len(dec)} nll |diff| mean {sum(dn)/len(dn):.2e} max {max(dn):.2e}")
a = json.load(open("/tmp/logs/ppl_bw0.json"))["positions"]; b = json.load(open("/tmp/logs/ppl_bw1.json"))["positions"]
print("exact vs bf16w: top-1 equal %d/%d, nll |diff| mean %.2e" % (sum(x["top1"] == y["top1"] for x, y in zip(a, b)), len(a), sum(abs(x["nll"] - y["nll"]) for x, y in zip(a, b)) / len(a)))
PY
el fidelity
wait $SP
for m in 0 1; do LILY_CUDA_QG_BF16W=$m timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof_bw$m.txt 2>&1; el "pfprof bf16w=$m"; grep -v upload $L/pfprof_bw$m.txt | head -40; done
S="--clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats"
timeout 150 ncu $S -k regex:gdn_chunk --launch-count 2 $B/lily-gpu-test pfprof /tmp/big 4K > $L/ncu-gdn.txt 2>&1; el "ncu gdn rc=$?"
grep -E "gdn_chunk|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Stall|Executed Ipc|L1/TEX Hit|Waves|Block Limit|Pipe" $L/ncu-gdn.txt | cut -c1-150 | head -80
safe_end
