#!/usr/bin/env bash
# fast.sh (device, ~4 min): the top-k's slots sized to the expert count, the x split by paired bf16
# rounding, silu/sigmoid with __fdividef. All kernel tests, prefill tests, e2e, HF fixtures; then
# prefill 4K + decode 4K/32K alternating the previous build (.carry/lily_old.xz) and this one.
. .carry/common.sh; synth_bg; safe_start 500; ab_old
timeout 150 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200
pf_checks
wait $SP
ab_bench 90 --model /tmp/big --backend cuda --no-plot --prefill 4K --reps 3 --warmup 1 --decode 4K,32K
safe_end
