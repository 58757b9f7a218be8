#!/usr/bin/env bash
# s29j.sh [VAR A B] (device, ~1 min): decode at 4K and 32K with VAR=A / VAR=B alternating, three pairs (default
# LILY_CUDA_MOE_ACC 0 / 1; the twenty-ninth session also ran it as `s29j.sh LILY_CUDA_GEMV2_BPS 3 2`).
. .carry/common.sh; safe_start 150
var=${1:-LILY_CUDA_MOE_ACC}; a=${2:-0}; b=${3:-1}
synth_bg; wait $SP; el synth
for v in $a $b $a $b $a $b; do
  env $var=$v timeout 40 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/$var=$v /"
done; el bench
safe_end
