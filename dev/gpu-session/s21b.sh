#!/usr/bin/env bash
# s21b.sh (device, ~5 min; twenty-first session, call 2): qgemm_gt.cu with the warp-specialised form removed
# (wrong in s21a's tests, and slower) and the narrow form taken by the engine's rule (lily_qg_gt 1: wide from
# 48 rows a group on average, narrow from GT_NARROW_MIN = 24, LILY_QG_GT_LO overrides). Correctness: the
# moegt cases (6 passes, the rule among them), e2e and the fixtures with the defaults and with the narrow
# form forced. Then short prompts with the old kernels against the narrow form from 8 rows (256 .. 2K,
# also with 4 column parts), and the closing sweep 256 .. 128K and the 4K breakdown of the defaults.
. .carry/common.sh; synth_bg; safe_start 540; export LILY_COMMIT=${LILY_COMMIT:-unknown}
LILY_GPU_PF=moegt timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
e2e_fix
LILY_CUDA_QG_GT=2 LILY_QG_GT_NARROW=1 e2e_fix
wait $SP; el synth
for i in 1 2; do for cfg in "LILY_CUDA_QG_GT=0" "LILY_CUDA_QG_GT=1 LILY_QG_GT_LO=8" "LILY_CUDA_QG_GT=1 LILY_QG_GT_LO=8 LILY_QG_GT_PARTS=4"; do
  env $cfg timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/$cfg /"
done; done; el short
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
pf_prof 24
safe_end
