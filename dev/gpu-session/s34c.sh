#!/usr/bin/env bash
# s34c.sh (branch exp-mf-kh; device, ~4 min): where moe_fused's time goes with its gate/up rows in two parts (LILY_CUDA_MF_KH).
# `LILY_CHAIN=experts lily-gpu-test chain` (240 launches a graph, PDL; new: the down slice from the slice-major
# copy unless LILY_CUDA_MOE_DSL=0, as HEAD's chain always had it off): HEAD's build, then this one with KH 0 / 1,
# DSL 0 / 1, twice; then the TRACE build's stamps (points 12 gate rows arrived, 10 their second part, 11 tile math
# done, 13 h, 14 down slice arrived, 3 partials added; from the wait) with KH 0 / 1.
. .carry/common.sh; safe_start 500
mkdir -p /tmp/tr && tar xJf $C/bin-trace.tar.xz -C /tmp/tr
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
row() { grep -E "moe_fused|fixed-point" | grep -v early | cut -c1-150; }
for i in 1 2; do
    LILY_CHAIN=experts timeout 60 /tmp/gt_old chain 2>&1 | row | sed "s/^/old /"; el old
    for d in 0 1; do for k in 0 1; do
        LILY_CHAIN=experts LILY_CUDA_MOE_DSL=$d LILY_CUDA_MF_KH=$k timeout 60 $B/lily-gpu-test chain 2>&1 | row | sed "s/^/dsl=$d kh=$k /"; el "dsl $d kh $k"
    done; done
done
for k in 0 1; do
    LILY_CHAIN=experts LILY_CUDA_MF_KH=$k timeout 60 /tmp/tr/lily-gpu-test chain > $L/trace_$k.txt 2>&1; el "trace kh $k rc=$?"
    grep -E "moe_fused|fixed-point|trace" $L/trace_$k.txt | grep -v early | cut -c1-400 | sed "s/^/kh=$k /"
done
safe_end
