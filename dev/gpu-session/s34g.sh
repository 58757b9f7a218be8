#!/usr/bin/env bash
# s34g.sh (device, ~5 min): gv2_tile's B operand loaded only by the lanes whose columns hold a part of x (the other
# lanes used to read a fixed zero vector: one more shared-memory address in each B load); bitwise the same. All
# kernel tests, e2e, HF fixtures, the 24 full-size decode steps against HEAD (cmp), moe_fused and gemv2 by ncu in
# the real step (HEAD, this build), decode 4K / 32K: HEAD against this build, three pairs.
. .carry/common.sh; safe_start 560
synth_bg
kernels_grep "^FAIL"
e2e_fix
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
ncu_ab gemv2
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
