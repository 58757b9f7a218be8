#!/usr/bin/env bash
# s13a.sh (device, ~3 min; thirteenth session, calls 1-2): the decode attention on the tensor cores
# (attn_tc.cu, LILY_CUDA_ATTN_TC). Its kernel tests, under memcheck, racecheck and synccheck; e2e with it on
# (the default) and off; the HF fixtures; the chain's attention rows at 4K / 32K / 128K; decode A/B of
# the switch on the full-size checkpoint.
. .carry/common.sh; synth_bg; safe_start 560
LILY_GPU_KERNELS=attn timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kattn.txt 2>&1; el "kernels attn rc=$?"; grep -E "attn|FAIL|passed" $L/kattn.txt | cut -c1-200
for tool in memcheck racecheck synccheck; do
  LILY_GPU_KERNELS=attn timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/san_$tool.txt 2>&1; el "$tool attn rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/san_$tool.txt | head -4
done
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|head_dim 256" $L/e2e.txt | cut -c1-330
LILY_CUDA_ATTN_TC=0 timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e_tc0.txt 2>&1; el "e2e TC=0 rc=$?"; grep -E "FAIL|passed" $L/e2e_tc0.txt | cut -c1-200
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
LILY_CHAIN="ttention" timeout 120 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -iE "attention|packed|us" $L/chain.txt | head -20
wait $SP; el synth
for v in 0 1 0 1; do
  LILY_CUDA_ATTN_TC=$v timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K,128K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/TC=$v /"
done; el bench
safe_end
