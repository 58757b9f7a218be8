#!/usr/bin/env bash
# s34b.sh (branch exp-mf-kh; device, ~4 min): moe_fused's gate and up codes in two parts by tensor maps (LILY_CUDA_MF_KH, default
# (The pad knob (s34a) and LILY_CUDA_DEV_MF_SKIP (s34a, s34b) were in this session's working build only, not committed.)
# 1), each warp's first two steps of tile math as soon as the first part arrives (bitwise the same). s34a.sh had
# put the gate/up tile math at ~2.7 us of the launch's critical path (LILY_CUDA_DEV_MF_SKIP=4), the down slice's
# dot products at ~1.1, the atomics at ~0. The moe kernel tests, e2e, HF fixtures, the full-size checkpoint's 24
# decode steps against HEAD's build (cmp), moe_fused's duration by ncu (old, new, KH=0, SKIP=4, SKIP=1), decode
# 4K / 32K with KH off / on alternating.
. .carry/common.sh; safe_start 560
synth_bg
LILY_GPU_KERNELS=moe kernels_grep "^FAIL|moe fused H=2048"
e2e_fix
grep -E "gate/up rows" $L/e2e.txt | cut -c1-200
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
ncu_envs moe_fused LILY_CUDA_MF_KH=0 LILY_CUDA_DEV_MF_SKIP=4 LILY_CUDA_DEV_MF_SKIP=1
DEC_AB=4K,32K dec_ab LILY_CUDA_MF_KH
safe_end
