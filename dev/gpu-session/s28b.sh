#!/usr/bin/env bash
# s28b.sh (device, ~9.5 min): the whole GPU suite on the build with the conv's sum order pinned and the GDN
# references fed the GPU's conv outputs, with the twenty-sixth session's failing seed (1796285961: its
# case 14 draw 2 is the inputs that failed): tests/run_gpu.sh's sanitizer groups (LILY_GPU_SAN=only,
# LILY_GPU_SAN_PAR=1) in the background beside its other groups (LILY_GPU_SAN=0), so the suite fits a call.
. .carry/common.sh; safe_start 580
export LILY_GPU_TEST=$B/lily-gpu-test LILY_BIN=$B/lily LILY_SEED=1796285961
LILY_GPU_SAN=only LILY_GPU_SAN_PAR=1 timeout 565 bash tests/run_gpu.sh > $L/san.txt 2>&1 & SANP=$!
LILY_GPU_SAN=0 timeout 565 bash tests/run_gpu.sh > $L/gpu.txt 2>&1; el "run_gpu (no sanitizers) rc=$?"
grep -E "^(PASS|FAIL) [a-z0-9-]+ \[[0-9]+ s\]$|^[0-9]+ passed|^FAIL" $L/gpu.txt | cut -c1-300 | tail -40
grep -E "T=2048 pos=300" $L/gpu.txt | cut -c1-300
wait $SANP; el "sanitizers rc=$?"
grep -E "^(PASS|FAIL) [a-z0-9-]+ \[[0-9]+ s\]$|^[0-9]+ passed|ERROR SUMMARY|RACECHECK SUMMARY" $L/san.txt | cut -c1-200 | tail -20
safe_end
