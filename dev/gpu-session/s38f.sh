#!/usr/bin/env bash
# s38f.sh (device, ~8 min; written in the thirty-eighth session, not yet run): two gemv2 prologue changes, same
# carry as s37a.sh:
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-flag.patch dev/patches/gemv2-parts.patch \
#        dev/patches/gemv2-wide.patch dev/patches/gemv2-fsplit.patch
# - gemv2-flag (always on in the patched build): thread 0 no longer tests the MoE sum's flag word right after
#   loading it, which held its warp's x loads, and so the block's norm, behind one more L2 round trip (every
#   in_proj and lm_head: 41 launches a step). The patched build's default kernels compile exactly as HEAD + this
#   patch alone (sass_cmp.py), so old (HEAD, lily_old) against new is its A/B.
# - gemv2-fsplit (LILY_CUDA_GV2_FSPLIT=1): x's digit split in the register prologue, one barrier and one
#   shared-memory round trip of x less; the same bits.
# 1. the patched build's gemv kernel tests (default; fsplit) and e2e (default);
# 2. the 24 full-size decode steps: old against new (bitwise expected), new against fsplit (bitwise expected);
# 3. decode 4K / 32K, three rounds of old, new, new with fsplit;
# 4. ncu medians of gemv2's launches in the real 4K step: old, new, fsplit.
. .carry/common.sh; safe_start 540
synth_bg; ab_old
LILY_GPU_KERNELS=gemv timeout 100 $B/lily-gpu-test kernels 61 > $L/k_new.txt 2>&1; el "gemv kernels, new rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_new.txt | cut -c1-200
LILY_CUDA_GV2_FSPLIT=1 LILY_GPU_KERNELS=gemv timeout 100 $B/lily-gpu-test kernels 62 > $L/k_fsplit.txt 2>&1; el "gemv kernels, fsplit rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_fsplit.txt | cut -c1-200
timeout 120 $B/lily-gpu-test e2e 61 > $L/e2e_new.txt 2>&1; el "e2e, new rc=$?"
grep -E "^FAIL|passed" $L/e2e_new.txt | cut -c1-200
wait $SP; el synth
logits_ab
decode_logits fsplit $B/lily LILY_CUDA_GV2_FSPLIT=1
cmp /tmp/l_new.f32 /tmp/l_fsplit.f32 && echo "full-size decode logits (24 steps): fsplit == new, bitwise"
D="--model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1"
for i in 1 2 3; do
    timeout 100 /tmp/lily_old bench $D --out $L/o$i 2>&1 | grep -E "^decode " | sed "s/^/old /"
    timeout 100 $B/lily bench $D --out $L/n$i 2>&1 | grep -E "^decode " | sed "s/^/new /"
    LILY_CUDA_GV2_FSPLIT=1 timeout 100 $B/lily bench $D --out $L/f$i 2>&1 | grep -E "^decode " | sed "s/^/fsplit /"
done; el bench
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
ncu_dur old gemv2_kernel /tmp/gt_old
ncu_dur new gemv2_kernel $B/lily-gpu-test
ncu_dur fsplit gemv2_kernel $B/lily-gpu-test LILY_CUDA_GV2_FSPLIT=1
safe_end
