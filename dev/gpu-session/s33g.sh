#!/usr/bin/env bash
# s33g.sh (device, ~5 min): moe_fused with two reorderings that keep its arithmetic (bitwise the same):
# the shared expert's partials taken while the gate/up rows are in flight (they need neither), and x / the
# shared h loaded by warps 1.. (warp 0 takes the top-k; its share of those loads was an L2 round trip between
# the top-k and the barrier: s33e.sh's ncu put 15.6 % of the samples on that barrier). Kernel tests, e2e, HF
# fixtures, the full-size checkpoint's 24 decode steps against the build before (lily_old: cmp), moe_fused's
# duration by ncu (120 launches of the per-kernel profile, old and new), decode 4K / 32K alternating.
. .carry/common.sh; safe_start 420
synth_bg
kernels_grep "^FAIL|moe fused"
e2e_fix
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
