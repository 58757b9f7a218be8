#!/usr/bin/env bash
# s37a.sh (device, ~6 min; written in the thirty-sixth session, not yet run): the fixed part of a decode launch,
# and gemv2 with one prologue an SM. Prepare with
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-flag.patch dev/patches/gemv2-parts.patch \
#        dev/patches/gemv2-wide.patch dev/patches/gemv2-fsplit.patch dev/patches/attn-comb-all.patch
# (the patched build carried, HEAD's as lily_old.xz; .carry/cluster_probe from prep.sh). The same carry serves
# s38f.sh. gemv2-flag is on in both arms of every comparison below; the variants are template instances
# chosen on the host, so the patched build's default kernels compile as HEAD + gemv2-flag alone.
#   1. dev/cluster/probe.cu: clusters of 2..16 resident at once, a barrier of 8 blocks by a global counter against
#      the cluster barrier, the floor of a launch in a PDL chain in a graph (empty / reading 8 KB of x).
#   2. gemv2's parts in the real 4K step (LILY_CUDA_DEV_GV2, timing only, wrong logits; ncu medians of its
#      launches): all; 1 no prologue; 4 no tile math; 5 neither; 8 the wait alone; decode 4K with each.
#   3. gemv2_wide (LILY_CUDA_GEMV2_WIDE=1: one block of 3 x 8 warps an SM sharing one prologue): the gemv kernel
#      tests with it, the 24 full-size decode steps against without (bitwise expected), ncu of both kernels,
#      decode 4K / 32K three alternating pairs.
. .carry/common.sh; safe_start 520
synth_bg
timeout 60 $C/cluster_probe > $L/probe.txt 2>&1; el "probe rc=$?"; cat $L/probe.txt
# First: the tests of what changed after the thirty-sixth session's last GPU run, on HEAD's build (lily_old /
# gt_old): gdn_front's review and its x layout (gv2_xmem_bytes); the GPU tests one family a file, sharing
# dev_buf.cuh (every kernel family); e2e's select / sample split. gemv.cu, moe_fused.cu and the chunked GDN
# compiled to the same PTX as before.
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
timeout 200 /tmp/gt_old kernels 53 > $L/k_head.txt 2>&1; el "kernels (HEAD) rc=$?"; grep -E "^FAIL|passed" $L/k_head.txt | cut -c1-200
timeout 120 /tmp/gt_old e2e 59 > $L/e2e_head.txt 2>&1; el "e2e (HEAD) rc=$?"; grep -E "^FAIL|passed" $L/e2e_head.txt | cut -c1-200
LILY_CUDA_GEMV2_WIDE=1 LILY_GPU_KERNELS=gemv timeout 100 $B/lily-gpu-test kernels 47 > $L/k_wide.txt 2>&1; el "gemv kernels, wide rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_wide.txt | cut -c1-200
wait $SP; el synth
ncu_envs gemv2 - LILY_CUDA_DEV_GV2=1 LILY_CUDA_DEV_GV2=4 LILY_CUDA_DEV_GV2=5 LILY_CUDA_DEV_GV2=8
AB_A=0 AB_B="1 4 5 8" AB_PAIRS=1 DEC_AB=4K dec_ab LILY_CUDA_DEV_GV2
decode_logits narrow $B/lily
decode_logits wide $B/lily LILY_CUDA_GEMV2_WIDE=1
cmp /tmp/l_narrow.f32 /tmp/l_wide.f32 && echo "full-size decode logits (24 steps): wide == narrow, bitwise"
ncu_envs "gemv2_wide|gemv2_kernel" - LILY_CUDA_GEMV2_WIDE=1
AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GEMV2_WIDE
safe_end
