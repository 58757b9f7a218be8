#!/usr/bin/env bash
# epi2.sh (device, ~3 min; branch pf-epi): the grouped GEMM's epilogue with per-row values in shared memory
# and the tile -> group search by ballots (prefill), and qk_kernel's rotation before the wait (decode). All
# kernel tests, prefill tests, e2e, HF fixtures; then prefill 4K and decode 4K / 32K alternating main's build
# (carry it as .carry/lily_old.xz: xz -c main's build/lily) and this one.
. .carry/common.sh; synth_bg; safe_start 400
ab_old; ab_checks
timeout 110 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-200 | head -5
wait $SP
ab_bench 90 --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --prefill 4K --decode 4K,32K
safe_end
