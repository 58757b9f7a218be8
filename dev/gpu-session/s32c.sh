#!/usr/bin/env bash
# s32c.sh (device, ~3 min): s32b found LILY_CUDA_MOE_EARLY=1 twice as slow (the router launch +64 us a layer: one
# SM's requests of 14 MB into L2) and the bound flat (the step's experts resident in L2: the same tok/s). What is
# left is the top-k's place: LILY_CUDA_MOE_EARLY=2 (the router's last block takes the top-k, no L2 requests)
# against 0, three pairs at 4K and 32K, and the per-kernel tables; and the bound of the top-k's cost itself:
# LILY_CUDA_DEV_MF_FIXED=1 (slot k -> expert k after the top-k) against 2 (no top-k), two pairs at 4K.
. .carry/common.sh; safe_start 400
synth_bg; wait $SP; el synth
AB_A=0 AB_B=2 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_MOE_EARLY
for v in 0 2; do
    env LILY_CUDA_MOE_EARLY=$v timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof_$v.txt 2>&1; el "prof $v rc=$?"; grep -E "moe|total" $L/prof_$v.txt
done
AB_A=1 AB_B=2 AB_PAIRS=2 DEC_AB=4K dec_ab LILY_CUDA_DEV_MF_FIXED
safe_end
