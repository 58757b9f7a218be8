#!/usr/bin/env bash
# fused6.sh (device, ~2 min): the one-launch MoE in `lily-gpu-test chain` (LILY_CHAIN=experts: the
# routed-expert rows only) from the normal build and from the TRACE=1 build (per-phase cycles inside
# the fused kernel: entry -> wait -> top-k, x split -> partials written -> barrier, sum, exit);
# kernel tests of the MoE family.
. .carry/common.sh; safe_start 300
LILY_GPU_KERNELS=moe timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels moe rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-260
LILY_CHAIN=experts timeout 120 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -E "^\||early" $L/chain.txt
mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
LILY_CHAIN=experts timeout 120 /tmp/bt/lily-gpu-test chain > $L/chain_trace.txt 2>&1; el "chain (trace) rc=$?"; grep -E "^\||trace" $L/chain_trace.txt
safe_end
