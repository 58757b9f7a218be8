#!/usr/bin/env bash
# s32a.sh (device, ~6 min): is moe_fused's expert fetch from DRAM on the step's critical path? A bound before
# building an early L2 prefetch of the routed experts. Diagnostics (wrong logits): LILY_CUDA_DEV_MF_FIXED=1 routes
# every slot k to expert k (the same code path, each layer's own experts, from DRAM); with LILY_CUDA_DEV_ALIAS=4
# every layer reads layer 0's experts, so the step's 8 experts (~14 MB) stay in L2; FIXED=2 also skips the top-k.
# Decode 4K, alternating, three rounds; then the per-kernel tables of one 4K step for FIXED=1 with and without
# the alias.
. .carry/common.sh; safe_start 560
synth_bg; wait $SP; el synth
run() { # NAME ENV...
    local n=$1; shift
    env "$@" timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 \
        --out $L/b_$n 2>&1 | grep -E "^decode " | sed "s/^/$n /"
}
for i in 1 2 3; do
    run base X=0
    run fixed1 LILY_CUDA_DEV_MF_FIXED=1
    run fixed1_l2 LILY_CUDA_DEV_MF_FIXED=1 LILY_CUDA_DEV_ALIAS=4
    run fixed2_l2 LILY_CUDA_DEV_MF_FIXED=2 LILY_CUDA_DEV_ALIAS=4
done; el bench
for v in "X=0" "LILY_CUDA_DEV_MF_FIXED=1" "LILY_CUDA_DEV_MF_FIXED=1 LILY_CUDA_DEV_ALIAS=4"; do
    env $v timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof.txt 2>&1; el "prof $v rc=$?"; grep -E "moe|total" $L/prof.txt
done
safe_end
