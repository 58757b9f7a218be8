#!/usr/bin/env bash
# s33j.sh (device, ~4.5 min; the session's final build 9710c9f): sanitizers on the moe kernels this session
# reordered (memcheck and racecheck of the moe kernel tests, racecheck of the moe e2e group as far as 110 s
# allow), then the closing decode sweep with the defaults.
. .carry/common.sh; safe_start 280
synth_bg
LILY_GPU_KERNELS=moe timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 21 > $L/mc_moe.txt 2>&1; el "memcheck moe kernels rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc_moe.txt
LILY_GPU_KERNELS=moe timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 22 > $L/rc_moe.txt 2>&1; el "racecheck moe kernels rc=$?"; grep -E "passed|RACECHECK SUMMARY" $L/rc_moe.txt
LILY_GPU_E2E=moe timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 23 > $L/rc_e2e_moe.txt 2>&1; el "racecheck e2e moe rc=$? (124: cut)"; echo "PASS lines: $(grep -c ^PASS $L/rc_e2e_moe.txt)"; grep -E "FAIL|passed|SUMMARY|azard" $L/rc_e2e_moe.txt | cut -c1-200 | sort | uniq -c | head -5
wait $SP; el synth
timeout 120 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode|ceiling" $L/sweep.txt | head
cp $L/sweep*.json $OUT/ 2>/dev/null
safe_end
