#!/usr/bin/env bash
# fused.sh (device, ~4 min): the one-launch MoE of a decode step (moe_fused.cu, LILY_CUDA_MOE_FUSED),
# first run: kernel tests (its cases against the CPU reference, in place, twice), e2e (whole decode
# steps with it on against the CPU backend), memcheck of the kernel tests, decode speed at 4K and 32K
# off/on alternating.
. .carry/common.sh; synth_bg; safe_start 520
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-260
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch" $L/e2e.txt | cut -c1-330
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck kernels rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt | head -5
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in 0 1 0 1; do LILY_CUDA_MOE_FUSED=$v timeout 60 $BB --decode 4K,32K --out $L/f$v 2>&1 | grep -E "^decode " | sed "s/^/moe_fused=$v /"; done; el bench
safe_end
