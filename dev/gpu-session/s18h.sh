#!/usr/bin/env bash
# (Ran a build of branch qgemm-tn: LILY_CUDA_QG_TN and LILY_GPU_PF=tn exist there, not on main.)
# s18h.sh (device, ~8 min; eighteenth session, call 8, the closing one): main's checks with qgemm_tn
# (the gate|up of 16-row tiles, default on): prefill tests, e2e, fixtures; prefill 256..4K with
# LILY_CUDA_QG_TN 0 / 1 alternating; cli_prefill; memcheck of the small prefill tests.
. .carry/common.sh; synth_bg; safe_start 540
pf_checks
wait $SP
env_ab LILY_CUDA_QG_TN --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,4K --decode none --reps 3 --warmup 1
pf_cli
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt; grep -E "qgemm_tn|FAIL" $L/memcheck.txt | cut -c1-120 | head -5
safe_end
