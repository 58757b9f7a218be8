#!/usr/bin/env bash
# v4.sh (device, ~2.5 min; branch fa-v4): the wgmma flash attention's V read straight from the tensor-map copy
# as an MN-major B (no transposition), both readings of the descriptor's fields (V modes 1, 2) against the
# transposition (0): the prefill tests (every D-256 case in each mode, and their speed), memcheck of the small
# ones; prefill 32K and 128K in each mode.
. .carry/common.sh; synth_bg; safe_start 280
timeout 130 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed|\| attention" $L/prefill.txt | cut -c1-250 | head -30
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP
for v in 0 1 2; do LILY_CUDA_FA_WG_V=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 32K,128K --out $L/v$v 2>&1 | grep -E "^prefill " | sed "s/^/V=$v /"; done; el bench
safe_end
