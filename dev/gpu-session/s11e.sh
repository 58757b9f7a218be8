#!/usr/bin/env bash
# s11e.sh (device, ~9 min; the eleventh session's closing call). The final build against the session's
# base (.carry/lily_old.xz, f2679f2): every check (kernels with the top-k, prefill with the rastered
# GEMMs, e2e with the top-k and sampling steps, fixtures, cli_prefill, demo fidelity, memcheck,
# racecheck of the MoE kernels), full-size prefill logits bitwise equal to the base, prefill/decode
# A/B, the server's decode per sampling setting (base and final alternating), pfprof 4K, both sweeps.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head
pf_checks
grep -E "sampling step|top-k step" $L/e2e.txt | cut -c1-200
pf_cli
demo_fid
san_checks
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/memcheck_topk.txt 2>&1; el "memcheck topk rc=$?"; tail -1 $L/memcheck_topk.txt
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/racecheck_topk.txt 2>&1; el "racecheck topk rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck_topk.txt | head -3
wait $SP; el synth
cmp_old_logits
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode 4K
srv_tok
for bin in /tmp/lily_old $B/lily /tmp/lily_old $B/lily; do
  lb=$([ $bin = $B/lily ] && echo new || echo old)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 timeout 120 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -26
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dsweep 2>&1 | grep -E "^decode |^#|tok/s" | head -8; el "decode sweep"
safe_end
