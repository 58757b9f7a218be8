#!/usr/bin/env bash
# s34d.sh (branch exp-mf-kh; device, ~4 min): the two-part gate/up copies (LILY_CUDA_MF_KH) without s34a-c's diagnostic knob, the
# gate/up maps in the kernel's two tensor-map slots (free with the slice-major down copy), so that the launch's
# parameters and registers are HEAD's. The moe kernel tests, e2e, HF fixtures, the 24 full-size decode steps
# against HEAD (cmp), the chain rows (HEAD's, then this build's DSL 0 (HEAD's chain) and DSL 1 with KH 0 / 1),
# moe_fused by ncu in the real step (HEAD, this build, KH=0), decode 4K / 32K with KH 0 / 1 alternating.
. .carry/common.sh; safe_start 560
synth_bg
LILY_GPU_KERNELS=moe kernels_grep "^FAIL|moe fused H=2048"
e2e_fix
grep -E "gate/up rows" $L/e2e.txt | cut -c1-200
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
row() { grep -E "fixed-point" | grep -v early | cut -c1-150; }
for i in 1 2; do
    LILY_CHAIN=experts timeout 60 /tmp/gt_old chain 2>&1 | row | sed "s/^/old /"
    for dk in "0 0" "1 0" "1 1"; do set -- $dk
        LILY_CHAIN=experts LILY_CUDA_MOE_DSL=$1 LILY_CUDA_MF_KH=$2 timeout 60 $B/lily-gpu-test chain 2>&1 | row | sed "s/^/dsl=$1 kh=$2 /"
    done
done; el chain
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
ncu_envs moe_fused LILY_CUDA_MF_KH=0
DEC_AB=4K,32K dec_ab LILY_CUDA_MF_KH
safe_end
