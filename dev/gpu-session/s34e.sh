#!/usr/bin/env bash
# s34e.sh (branch exp-mf-kh; device, ~5 min): the two-part gate/up copies (LILY_CUDA_MF_KH) as moe_fused's own instantiation (KH),
# the one-copy kernel's PTX HEAD's. All kernel tests (gv2_tile's shared-memory path changed), e2e, HF fixtures,
# the 24 full-size decode steps against HEAD (cmp), moe_fused by ncu in the real step (HEAD, this build, KH=0),
# decode 4K / 32K: HEAD against this build, three pairs.
. .carry/common.sh; safe_start 560
synth_bg
kernels_grep "^FAIL|moe fused H=2048"
e2e_fix
grep -E "gate/up rows" $L/e2e.txt | cut -c1-200
wait $SP; el synth
ab_old
logits_ab
ncu_ab moe_fused
ncu_envs moe_fused LILY_CUDA_MF_KH=0
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
