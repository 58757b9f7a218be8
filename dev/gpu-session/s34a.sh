#!/usr/bin/env bash
# s34a.sh (branch exp-mf-kh; device, ~8 min): moe_fused's gate and up rows padded in shared memory (LILY_CUDA_MF_PAD, default 1:
# (The pad knob (s34a) and LILY_CUDA_DEV_MF_SKIP (s34a, s34b) were in this session's working build only, not committed.)
# a bulk copy a row, rows 1,088 and 144 bytes apart, so gv2_tile's loads meet different banks; bitwise the same),
# and the diagnostic LILY_CUDA_DEV_MF_SKIP (1: no down-slice dot products, 2: no atomics, 4: no gate/up tile
# math; wrong logits) to see what each part of moe_fused costs. The moe kernel tests, e2e, HF fixtures, the
# full-size checkpoint's 24 decode steps against HEAD's build (cmp), moe_fused's duration by ncu for old, new
# and each variant, decode 4K with the pad off / on alternating.
. .carry/common.sh; safe_start 560
synth_bg
LILY_GPU_KERNELS=moe kernels_grep "^FAIL|moe fused"
e2e_fix
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
ncu_envs moe_fused LILY_CUDA_MF_PAD=0 LILY_CUDA_DEV_MF_SKIP=1 LILY_CUDA_DEV_MF_SKIP=2 LILY_CUDA_DEV_MF_SKIP=4 LILY_CUDA_DEV_MF_SKIP=7
DEC_AB=4K,32K AB_A=0 AB_B=1 dec_ab LILY_CUDA_MF_PAD
AB_A=0 AB_B=2 AB_PAIRS=1 dec_ab LILY_CUDA_DEV_MF_SKIP
safe_end
