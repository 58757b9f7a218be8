#!/usr/bin/env bash
# inv.sh (device, ~2.5 min): phase A's blocked inverse (diagonal 16 x 16 blocks by substitution,
# then the blocks below by products): prefill tests (chunked vs CPU and scan), e2e, pfprof 4K; and
# the MoE tile question with bf16 weights: lily bench prefill with the tile rule vs every GEMM on
# 128-row tiles (LILY_CUDA_QG_TILE=128), alternating.
. .carry/common.sh; synth_bg; safe_start 200
timeout 100 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head; grep -E "chunked.*T=(2048|1000|200|65) " $L/prefill.txt | cut -c1-200
timeout 40 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
wait $SP
timeout 40 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -E "plain|gdn" $L/pfprof.txt | head -8
for v in "" 128 "" 128; do LILY_CUDA_QG_TILE=$v timeout 40 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 2K,4K,32K --decode none --reps 1 --warmup 1 --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/tile=${v:-rule} /"; done; el bench
safe_end
