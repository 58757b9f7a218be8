#!/usr/bin/env bash
# s37b.sh (device, ~7 min; written in the thirty-seventh session, not yet run): gemv2 in clusters whose first block
# multicasts the prologue's activations to the others (LILY_CUDA_GV2_MC = 2 / 4 / 8, dev/patches/gemv2-mc.patch).
# The carry of s37a.sh:
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-parts.patch dev/patches/gemv2-wide.patch \
#        dev/patches/gemv2-mc.patch dev/patches/gemv2-pipe.patch
#   1. the gemv kernel tests with clusters of 2 and 4 (each case's register-prologue run takes the cluster kernel, and
#      the bulk-staged run, still gemv2_kernel, must equal it bitwise), e2e's base group with 4;
#   2. the 24 full-size decode steps with 2 / 4 / 8 against without (bitwise expected: the same arithmetic);
#   3. ncu of the gemv launches of one prof step (plain launches, no PDL) without and with each size;
#   4. decode 4K / 32K, three alternating rounds of 0 / 2 / 4, then 0 / 8 at 4K once.
. .carry/common.sh; safe_start 540
synth_bg
for c in 2 4; do
    LILY_CUDA_GV2_MC=$c LILY_GPU_KERNELS=gemv timeout 90 $B/lily-gpu-test kernels 61 > $L/k_mc$c.txt 2>&1; el "gemv kernels, mc $c rc=$?"
    grep -E "^FAIL|passed|DIFFERS" $L/k_mc$c.txt | cut -c1-200
done
LILY_CUDA_GV2_MC=4 LILY_GPU_E2E=base timeout 90 $B/lily-gpu-test e2e 67 > $L/e2e_mc4.txt 2>&1; el "e2e base, mc 4 rc=$?"
grep -E "^FAIL|passed" $L/e2e_mc4.txt | cut -c1-200
wait $SP; el synth
decode_logits narrow $B/lily
for c in 2 4 8; do
    decode_logits mc$c $B/lily LILY_CUDA_GV2_MC=$c
    cmp /tmp/l_narrow.f32 /tmp/l_mc$c.f32 && echo "full-size decode logits (24 steps): mc $c == without, bitwise"
done
ncu_envs "gemv2_mc_kernel|gemv2_kernel" - LILY_CUDA_GV2_MC=2 LILY_CUDA_GV2_MC=4 LILY_CUDA_GV2_MC=8
AB_A=0 AB_B="2 4" AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GV2_MC
AB_A=0 AB_B=8 AB_PAIRS=1 dec_ab LILY_CUDA_GV2_MC
safe_end
