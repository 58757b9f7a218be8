#!/usr/bin/env bash
# s35c.sh (device, ~5 min; 85fc22e, gv2_tile on the integer MMA): the per-kernel table of one 4K step; the decode
# switches that were measured off before the tile math got cheaper, again (env_ab, 4K, three pairs each); the
# closing decode sweep with the defaults.
. .carry/common.sh; safe_start 420
synth_bg; wait $SP; el synth
timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof.txt 2>&1; el "prof rc=$?"; grep -E "^\|" $L/prof.txt
export DEC_AB=4K AB_PAIRS=3
dec_ab LILY_CUDA_MOE_FRONT
AB_B=2 dec_ab LILY_CUDA_MOE_FRONT
dec_ab LILY_CUDA_GDN_OUT
dec_ab LILY_CUDA_GV2_BULK
dec_ab LILY_CUDA_PDL_EARLY
dec_ab LILY_CUDA_MOE_PF
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode|ceiling" $L/sweep.txt | head
cp $L/sweep*.json $OUT/ 2>/dev/null
safe_end
