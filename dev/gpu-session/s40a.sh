#!/usr/bin/env bash
# s40a.sh (device, ~7 min; written in the thirty-ninth session, not yet run): where the step's time goes after the
# thirty-ninth session's changes, by parts left out in the real step (timing only, wrong logits). Prepare with
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-parts.patch dev/patches/moe-parts.patch dev/patches/gemv2-l1pf.patch
# The two parts patches add template instances chosen on the host, their default kernels compiled as main's (sass.sh
# cmp); the L1 prefetch patch is a switch, default off.
#   1. moe_fused (LILY_CUDA_DEV_MF): 1 no gate/up tile math, 2 no down slice, 4 no top-k, 7 none of the three,
#      8 the wait alone, 16 no atomics, every value still computed (forty-first session; it replaced mode 3, 1 and 2
#      together, to keep the call's length): ncu medians of its 120 launches in `lily-gpu-test prof`, decode 4K
#      with each;
#   2. gemv2 (LILY_CUDA_DEV_GV2) again after the fused split: 1 no prologue, 4 no tile math, 5 neither, 8 the wait;
#   3. both families at their wait (the step of the GDN step, attention, combine, embedding and selection alone);
#   4. (fortieth session) gemv2's first tile prefetched into L1 (LILY_CUDA_GV2_L1PF, gemv2-l1pf.patch; same values):
#      1 after the wait, behind x's loads; 3 the first two tiles after the wait; 5 (forty-first session) as 1, with
#      the GV_RESID epilogue's residual rows and MoE sums (out_proj, o_proj). Mode 2 (into L1 instead of L2 before
#      the wait) is left out of the timing to keep the call's length. Since the forty-first session the patch is a
#      switch ready to land (option, flag gemv2_l1pf, default 0): its e2e decodes every mode bitwise against the
#      default and the gemv kernel tests run each mode; both run below.
. .carry/common.sh; safe_start 560
synth_bg
l1pf_checks
wait $SP; el synth
ncu_envs moe_fused - LILY_CUDA_DEV_MF=1 LILY_CUDA_DEV_MF=2 LILY_CUDA_DEV_MF=4 LILY_CUDA_DEV_MF=7 LILY_CUDA_DEV_MF=8 LILY_CUDA_DEV_MF=16
AB_A=0 AB_B="1 2 4 7 8 16" AB_PAIRS=1 DEC_AB=4K dec_ab LILY_CUDA_DEV_MF
ncu_envs gemv2 - LILY_CUDA_DEV_GV2=1 LILY_CUDA_DEV_GV2=4 LILY_CUDA_DEV_GV2=5 LILY_CUDA_DEV_GV2=8
AB_A=0 AB_B="1 4 5 8" AB_PAIRS=1 DEC_AB=4K dec_ab LILY_CUDA_DEV_GV2
D="--model /tmp/big --backend cuda --no-plot --prefill none --reps 2 --warmup 1 --decode 4K"
LILY_CUDA_DEV_MF=8 LILY_CUDA_DEV_GV2=8 timeout 100 $B/lily bench $D --out $L/both8 2>&1 | grep -E "^decode " | sed "s/^/MF=8 GV2=8 /"
timeout 100 $B/lily bench $D --out $L/def 2>&1 | grep -E "^decode " | sed "s/^/default /"
ncu_envs gemv2 LILY_CUDA_GV2_L1PF=1 LILY_CUDA_GV2_L1PF=3 LILY_CUDA_GV2_L1PF=5
AB_A=0 AB_B="1 3 5" AB_PAIRS=2 DEC_AB=4K dec_ab LILY_CUDA_GV2_L1PF
safe_end
