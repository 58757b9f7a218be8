#!/usr/bin/env bash
# s32b.sh (device, ~9 min): the router's launch taking the MoE's top-k and requesting the selected experts into L2
# (LILY_CUDA_MOE_EARLY). Kernel tests (gemv, moe: the new moe early cases), the moe e2e group (moe_early bitwise
# against off), decode A/B of LILY_CUDA_MOE_EARLY at 4K and 32K (three pairs), the per-kernel tables of one 4K step
# with it off and on. Before those, a bound (diagnostics, wrong logits): LILY_CUDA_DEV_MF_FIXED=1 routes slot k to
# expert k (each layer's own experts, from DRAM); with LILY_CUDA_DEV_ALIAS=4 every layer reads layer 0's experts,
# so the step's 8 experts (~14 MB) stay in L2. Decode 4K, alternating, two rounds.
. .carry/common.sh; safe_start 575
synth_bg
for f in gemv moe; do
    LILY_GPU_KERNELS=$f timeout 150 $B/lily-gpu-test kernels $(date +%s) > $L/k_$f.txt 2>&1; el "kernels $f rc=$?"
    grep -E "^FAIL|passed|moe early" $L/k_$f.txt | cut -c1-330
done
LILY_GPU_E2E=moe timeout 100 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e moe rc=$?"; grep -E "FAIL|passed|moe_early" $L/e2e.txt | cut -c1-260
wait $SP; el synth
run() { # NAME ENV...
    local n=$1; shift
    env "$@" timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 \
        --out $L/b_$n 2>&1 | grep -E "^decode " | sed "s/^/$n /"
}
for i in 1 2; do
    run fixed1 LILY_CUDA_DEV_MF_FIXED=1
    run fixed1_l2 LILY_CUDA_DEV_MF_FIXED=1 LILY_CUDA_DEV_ALIAS=4
done; el bound
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_MOE_EARLY
prof_ab LILY_CUDA_MOE_EARLY "moe|total"
safe_end
