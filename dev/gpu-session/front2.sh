#!/usr/bin/env bash
# front2.sh (device, ~2.5 min): moe_fused with registers capped (MF_REGS) and the front as its own
# instantiation: MoE kernel tests, e2e, then decode 4K/32K alternating: two launches, fused without
# the front, fused with it (LILY_CUDA_MOE_FUSED / LILY_CUDA_MOE_FRONT).
. .carry/common.sh; synth_bg; safe_start 400
LILY_GPU_KERNELS=moe timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels moe rc=$?"; grep -E "FAIL|passed|front" $L/kernels.txt | cut -c1-200
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|front" $L/e2e.txt | cut -c1-200
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "0 0" "1 0" "1 1" "0 0" "1 0" "1 1"; do set -- $v; LILY_CUDA_MOE_FUSED=$1 LILY_CUDA_MOE_FRONT=$2 timeout 60 $BB --decode 4K,32K --out $L/f$1$2 2>&1 | grep -E "^decode " | sed "s/^/fused=$1 front=$2 /"; done; el bench
safe_end
