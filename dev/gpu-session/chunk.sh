#!/usr/bin/env bash
# chunk.sh (device, ~3 min): prefill chunk size with the wgmma flash attention: LILY_CUDA_CHUNK 4096 / 8192 /
# 16384 at 8K, 16K, 32K and 128K (tok/s and peak MiB); racecheck of the small prefill tests.
. .carry/common.sh; synth_bg; safe_start 400
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/racecheck.txt 2>&1; el "racecheck rc=$?"; tail -2 $L/racecheck.txt
wait $SP
A="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none"
for v in 4096 8192 16384; do LILY_CUDA_CHUNK=$v timeout 150 $B/lily bench $A --prefill 8K,16K,32K,128K --out $L/c$v 2>&1 | grep -E "^prefill " | sed "s/^/chunk=$v /"; el "chunk $v"; done
safe_end
