#!/usr/bin/env bash
# s29f.sh (device, ~2.5 min): the fixed-point sums' atomics started at rotated rows (a block's or a head's own
# offset): the per-kernel table (prof) with LILY_CUDA_GDN_OUT 0, 1 and 1 without its atomics (timing only),
# then decode at 4K alternating 0 / 1.
. .carry/common.sh; safe_start 260
synth_bg; wait $SP; el synth
for v in 0 1 2; do
  LILY_CUDA_GDN_OUT=$(( v > 0 )) LILY_CUDA_GDN_OUT_DBG=$(( v == 2 )) timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof_$v.txt 2>&1; el "prof variant $v rc=$?"; grep -E "gdn|moe|total" $L/prof_$v.txt
done
for v in 0 1 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/GDN_OUT=$v /"
done; el bench
safe_end
