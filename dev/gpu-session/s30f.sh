#!/usr/bin/env bash
# s30f.sh (device, ~2 min): one tile a block where halving gemv2's warps a tile allows it (LILY_CUDA_GEMV2_FIT):
# the kernel tests and e2e with it on, the chain rows of GDN in_proj with it off and on, decode at 4K and 32K
# with LILY_CUDA_GEMV2_FIT 0 / 1 alternating (three pairs).
# Ran on a build with LILY_CUDA_GEMV2_FIT (gemv.cu gemv_plan; not kept: within noise, docs/PERF.md).
. .carry/common.sh; safe_start 400
synth_bg
LILY_CUDA_GEMV2_FIT=1 timeout 200 $B/lily-gpu-test kernels $(date +%s) > $L/kernels_fit.txt 2>&1; el "kernels (fit) rc=$?"
grep -E "^FAIL|passed|timing rows=(8192|12352)" $L/kernels_fit.txt | cut -c1-250
for v in 0 1; do
    LILY_CUDA_GEMV2_FIT=$v LILY_CHAIN="GDN in_proj" timeout 60 $B/lily-gpu-test chain > $L/chain_fit$v.txt 2>&1; el "chain in_proj fit=$v rc=$?"
    grep -E "^\| GDN" $L/chain_fit$v.txt | cut -c1-160
done
LILY_CUDA_GEMV2_FIT=1 timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e_fit.txt 2>&1; el "e2e (fit) rc=$?"; grep -E "FAIL|passed" $L/e2e_fit.txt | cut -c1-200
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GEMV2_FIT
safe_end
