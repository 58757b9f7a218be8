#!/usr/bin/env bash
# s19e.sh (device, ~6 min; nineteenth session, call 5): the closing sweep of main (prefill 256 .. 128K,
# decode 256 .. 128K) and the sanitizers on the small prefill tests (the new combine + norm kernel's
# shared row: memcheck and racecheck).
. .carry/common.sh; synth_bg; safe_start 560; export LILY_COMMIT=${LILY_COMMIT:-unknown}
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 8 small > $L/racecheck.txt 2>&1; el "racecheck rc=$?"; grep -E "passed|SUMMARY" $L/racecheck.txt | tail -2
wait $SP; el synth
timeout 260 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 256,4K,32K,128K --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
safe_end
