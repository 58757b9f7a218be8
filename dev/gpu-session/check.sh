#!/usr/bin/env bash
# check.sh (device, ~8 min): main's GPU suite after a change of defaults: kernels, prefill, e2e, the
# HF fixtures, memcheck of the small prefill tests, then racecheck of e2e (~6 min, last so that the
# rest comes back if it runs out).
. .carry/common.sh; safe_start 570
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|DIFFERS|passed" $L/kernels.txt | cut -c1-200
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-200 | head
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 120 env LILY_GPU_HF_BF16=tests/gpu/hf_bf16 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-200
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -2 $L/memcheck.txt
timeout 330 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 7 > $L/racecheck.txt 2>&1; el "racecheck e2e rc=$?"; grep -E "FAIL|passed|RACECHECK SUMMARY|hazard" $L/racecheck.txt | head
safe_end
