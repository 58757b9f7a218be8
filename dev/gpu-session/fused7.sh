#!/usr/bin/env bash
# fused7.sh (device, ~2.5 min): the one-launch MoE's down slice by tensor-map copies
# (LILY_CUDA_MOE_FUSED_TMA) against 16-byte loads: MoE kernel tests (both ways bitwise), memcheck of
# them, e2e, the chain row and its trace (entry -> wait -> top-k -> partials written -> exit), decode
# 4K/32K alternating.
. .carry/common.sh; synth_bg; safe_start 300
LILY_GPU_KERNELS=moe timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels moe rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-260
LILY_GPU_KERNELS=moe timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck moe rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt | head -5
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch" $L/e2e.txt | cut -c1-330
for t in 0 1; do LILY_CUDA_MOE_FUSED_TMA=$t LILY_CHAIN=experts timeout 60 $B/lily-gpu-test chain 2>&1 | grep -E "moe_fused" | head -1 | sed "s/^/tma=$t /"; done
mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
for t in 0 1; do LILY_CUDA_MOE_FUSED_TMA=$t LILY_CHAIN=experts timeout 60 /tmp/bt/lily-gpu-test chain 2>&1 | grep -E "moe_fused" -B1 | head -1 | sed "s/^/tma=$t /"; done; el chain
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "1 0" "1 1" "1 0" "1 1"; do set -- $v; LILY_CUDA_MOE_FUSED=$1 LILY_CUDA_MOE_FUSED_TMA=$2 timeout 60 $BB --decode 4K,32K --out $L/f$1$2 2>&1 | grep -E "^decode " | sed "s/^/fused=$1 tma=$2 /"; done; el bench
safe_end
