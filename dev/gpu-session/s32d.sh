#!/usr/bin/env bash
# s32d.sh (device, ~9.5 min): main with the diagnostics only (LILY_CUDA_DEV_MF_FIXED, LILY_CUDA_DEV_ALIAS=4; MOE_EARLY on
# branch exp-moe-early): kernel tests, e2e, HF fixtures; then racecheck of the e2e base group (the decode kernels
# of the tiny models: gemv2, GDN step, attention, moe_fused, token selection, graph replay), as far as the call allows,
# and memcheck of the same group after it.
. .carry/common.sh; safe_start 575
kernels_grep "^FAIL"
e2e_fix
LILY_GPU_E2E=base timeout 380 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 11 > $L/rc_base.txt 2>&1; el "racecheck e2e base rc=$?"
grep -cE "^PASS" $L/rc_base.txt; grep -E "FAIL|passed|RACECHECK SUMMARY|Hazard|hazard" $L/rc_base.txt | sort | uniq -c | head
tail -2 $L/rc_base.txt | cut -c1-200
LILY_GPU_E2E=base timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 12 > $L/mc_base.txt 2>&1; el "memcheck e2e base rc=$?"
grep -cE "^PASS" $L/mc_base.txt; grep -E "FAIL|passed|ERROR SUMMARY" $L/mc_base.txt | head -5
safe_end
