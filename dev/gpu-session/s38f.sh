#!/usr/bin/env bash
# s38f.sh (device, ~8 min; written in the thirty-eighth session, not yet run): three changes found in the decode
# kernels' SASS (dev/tools/sass_chain.py), each an L2 round trip or more off a launch's path. Same carry as s37a.sh:
#   bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-flag.patch dev/patches/gemv2-parts.patch \
#        dev/patches/gemv2-wide.patch dev/patches/gemv2-fsplit.patch dev/patches/attn-comb-all.patch
# - gemv2-flag (always on in the patched build): the MoE sum's flag word no longer holds a warp's loads. In the
#   prologue (in_proj, lm_head: 41 launches a step) thread 0 tested it right after its load, ahead of its warp's x
#   loads; in the GV_RESID epilogue (out_proj, o_proj: 40 launches) mf_fold's branch put the sum's load behind
#   the flag's. The patched build's default kernels compile exactly as HEAD + this patch alone (sass_cmp.py), so
#   old (HEAD, lily_old) against new is its A/B.
# - gemv2-fsplit (LILY_CUDA_GV2_FSPLIT=1): x's digit split in the register prologue, one barrier and one
#   shared-memory round trip of x less; the same bits.
# - attn-comb-all (LILY_CUDA_ATTN_COMB=2): the split-KV combine requests all 32 partials of a dim and its gate at
#   once (the batches of 8 and the gate were five round trips in a row); the same bits.
# 1. the patched build's gemv kernel tests (default; fsplit), attn kernel tests (combine 0 / 1 / 2 bitwise), e2e;
# 2. the 24 full-size decode steps: old against new, new against fsplit and against comb 2 (bitwise expected);
# 3. decode 4K, three rounds of old, new, fsplit, comb 2; then 32K, one round;
# 4. if time is left, ncu medians of gemv2 and of the combine in the real 4K step: old, new, fsplit, comb 2.
. .carry/common.sh; safe_start 560
synth_bg; ab_old
LILY_GPU_KERNELS=gemv timeout 100 $B/lily-gpu-test kernels 61 > $L/k_new.txt 2>&1; el "gemv kernels, new rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_new.txt | cut -c1-200
LILY_CUDA_GV2_FSPLIT=1 LILY_GPU_KERNELS=gemv timeout 100 $B/lily-gpu-test kernels 62 > $L/k_fsplit.txt 2>&1; el "gemv kernels, fsplit rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_fsplit.txt | cut -c1-200
LILY_GPU_KERNELS=attn timeout 100 $B/lily-gpu-test kernels 63 > $L/k_attn.txt 2>&1; el "attn kernels rc=$?"
grep -E "^FAIL|passed|DIFFERS" $L/k_attn.txt | cut -c1-200
timeout 120 $B/lily-gpu-test e2e 61 > $L/e2e_new.txt 2>&1; el "e2e, new rc=$?"
grep -E "^FAIL|passed" $L/e2e_new.txt | cut -c1-200
wait $SP; el synth
logits_ab
decode_logits fsplit $B/lily LILY_CUDA_GV2_FSPLIT=1
cmp /tmp/l_new.f32 /tmp/l_fsplit.f32 && echo "full-size decode logits (24 steps): fsplit == new, bitwise"
decode_logits comb $B/lily LILY_CUDA_ATTN_COMB=2
cmp /tmp/l_new.f32 /tmp/l_comb.f32 && echo "full-size decode logits (24 steps): comb 2 == new, bitwise"
D="--model /tmp/big --backend cuda --no-plot --prefill none --reps 2 --warmup 1"
arms() { # CONTEXTS ROUNDS
    local i; for i in $(seq $2); do
        timeout 100 /tmp/lily_old bench $D --decode $1 --out $L/o$1$i 2>&1 | grep -E "^decode " | sed "s/^/old /"
        timeout 100 $B/lily bench $D --decode $1 --out $L/n$1$i 2>&1 | grep -E "^decode " | sed "s/^/new /"
        LILY_CUDA_GV2_FSPLIT=1 timeout 100 $B/lily bench $D --decode $1 --out $L/f$1$i 2>&1 | grep -E "^decode " | sed "s/^/fsplit /"
        LILY_CUDA_ATTN_COMB=2 timeout 100 $B/lily bench $D --decode $1 --out $L/c$1$i 2>&1 | grep -E "^decode " | sed "s/^/comb2 /"
    done; el "bench $1"
}
arms 4K 3
arms 32K 1
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
ncu_dur old gemv2_kernel /tmp/gt_old
ncu_dur new gemv2_kernel $B/lily-gpu-test
ncu_dur fsplit gemv2_kernel $B/lily-gpu-test LILY_CUDA_GV2_FSPLIT=1
ncu_dur old attn_combine /tmp/gt_old
ncu_dur comb2 attn_combine $B/lily-gpu-test LILY_CUDA_ATTN_COMB=2
safe_end
