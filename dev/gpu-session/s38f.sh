#!/usr/bin/env bash
# s38f.sh (device, ~3-4 min; written in the thirty-eighth session, not yet run): gemv2 with x's digit split fused
# into the register prologue (LILY_CUDA_GV2_FSPLIT=1: one barrier and one shared-memory round trip of x less between
# the wait and the first tile; the same bits). Same carry as s37a.sh:
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-parts.patch dev/patches/gemv2-wide.patch dev/patches/gemv2-fsplit.patch
# 1. the gemv kernel tests and e2e with it on (bitwise checks against the split pass: "DIFFERS" lines);
# 2. the 24 full-size decode steps with it on against off: bitwise expected;
# 3. ncu medians of gemv2's launches in the real 4K step, off / on;
# 4. decode 4K / 32K, three alternating pairs.
. .carry/common.sh; safe_start 400
synth_bg
LILY_CUDA_GV2_FSPLIT=1 LILY_GPU_KERNELS=gemv timeout 100 $B/lily-gpu-test kernels 61 > $L/k_fsplit.txt 2>&1; el "gemv kernels, fsplit rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_fsplit.txt | cut -c1-200
LILY_CUDA_GV2_FSPLIT=1 timeout 120 $B/lily-gpu-test e2e 61 > $L/e2e_fsplit.txt 2>&1; el "e2e, fsplit rc=$?"
grep -E "^FAIL|passed" $L/e2e_fsplit.txt | cut -c1-200
wait $SP; el synth
decode_logits split $B/lily
decode_logits fsplit $B/lily LILY_CUDA_GV2_FSPLIT=1
cmp /tmp/l_split.f32 /tmp/l_fsplit.f32 && echo "full-size decode logits (24 steps): fsplit == split pass, bitwise"
ncu_envs gemv2_kernel - LILY_CUDA_GV2_FSPLIT=1
AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GV2_FSPLIT
safe_end
