#!/usr/bin/env bash
# s33i.sh (device, ~5 min): moe_fused's gate/up/down rows requested by warp 0 right after its top-k, not after
# the block barrier that also waits for the other warps' loads (bitwise the same). Against s33g.sh's build
# (lily_old): kernel tests, e2e, HF fixtures, the full-size checkpoint's 24 decode steps (cmp), moe_fused's
# duration by ncu (120 launches), decode 4K / 32K alternating, three pairs.
. .carry/common.sh; safe_start 420
synth_bg
kernels_grep "^FAIL"
e2e_fix
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
