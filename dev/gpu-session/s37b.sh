#!/usr/bin/env bash
# s37b.sh (device, ~6 min; written in the thirty-seventh session, not yet run; optional, after s37a.sh and the
# sanitizer runs): gemv2 with each warp's weight loads one step ahead over its whole walk (LILY_CUDA_GV2_PIPE=1,
# dev/patches/gemv2-pipe.patch), and the same with x's digit split taken from the prologue's registers (=2).
# Expected within noise: with two steps' loads live, as gemv2 has, the exposed latencies stay about one a pair of
# steps, and the thirtieth session's neighbours (the next tiles prefetched to L2, one tile a block) moved nothing
# (docs/PERF.md, thirty-seventh session). The carry of s37a.sh serves both:
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-parts.patch dev/patches/gemv2-wide.patch dev/patches/gemv2-pipe.patch
#   1. the gemv kernel tests with each: a case's register-prologue run takes the new kernel where it applies (4-bit
#      segments), and the bulk-staged run (still gemv2_kernel) must equal it bitwise;
#   2. the 24 full-size decode steps against without (bitwise expected: the same arithmetic in the same order);
#   3. ncu of the gemv launches of one prof step without and with each;
#   4. decode 4K / 32K, three alternating rounds of 0 / 1 / 2.
. .carry/common.sh; safe_start 440
synth_bg
for v in 1 2; do
    LILY_CUDA_GV2_PIPE=$v LILY_GPU_KERNELS=gemv timeout 90 $B/lily-gpu-test kernels 71 > $L/k_pipe$v.txt 2>&1; el "gemv kernels, pipe $v rc=$?"
    grep -E "^FAIL|passed|DIFFERS" $L/k_pipe$v.txt | cut -c1-200
done
wait $SP; el synth
decode_logits narrow $B/lily
for v in 1 2; do
    decode_logits pipe$v $B/lily LILY_CUDA_GV2_PIPE=$v
    cmp /tmp/l_narrow.f32 /tmp/l_pipe$v.f32 && echo "full-size decode logits (24 steps): pipe $v == without, bitwise"
done
ncu_envs "gemv2_pipe_kernel|gemv2_kernel" - LILY_CUDA_GV2_PIPE=1 LILY_CUDA_GV2_PIPE=2
AB_A=0 AB_B="1 2" AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GV2_PIPE
safe_end
