#!/usr/bin/env bash
# epi2.sh (device, ~2 min): the grouped GEMM's epilogue with each row's output row and scale in shared
# memory, and the tile -> group search in two ballot rounds. All prefill kernel tests; prefill 4K / 32K.
. .carry/common.sh; synth_bg; safe_start 185
timeout 110 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-200 | head -5
wait $SP
timeout 45 $B/lily bench --model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1 --prefill 4K,32K --out $L/b 2>&1 | grep -E "^prefill "; el bench
safe_end
