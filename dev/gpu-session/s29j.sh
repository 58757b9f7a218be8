#!/usr/bin/env bash
# s29j.sh (device, ~1.5 min): decode at 4K and 32K with LILY_CUDA_MOE_ACC 0 / 1, alternating, three pairs (the
# session's closing build).
. .carry/common.sh; safe_start 150
synth_bg; wait $SP; el synth
for v in 0 1 0 1 0 1; do
  LILY_CUDA_MOE_ACC=$v timeout 40 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/MOE_ACC=$v /"
done; el bench
safe_end
