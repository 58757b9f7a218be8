#!/usr/bin/env bash
# s29a.sh (device, ~8-9 min): racecheck of e2e to its end, alone (the twenty-eighth session's runs of it were
# cut by the call's limit after 20 of 57 tests, 0 hazards), then the 4K decode point of the build (no decode
# kernel's speed was measured since the twenty-sixth session: 401.6 tok/s). s29b.sh runs the prefill tests.
. .carry/common.sh; safe_start 585
synth_bg
timeout 520 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e $(date +%s) > $L/rc_e2e.txt 2>&1; el "racecheck e2e rc=$?"
echo "passed $(grep -c ^PASS $L/rc_e2e.txt), failed $(grep -c ^FAIL $L/rc_e2e.txt)"; grep -E "RACECHECK SUMMARY|^FAIL" $L/rc_e2e.txt | head -5
wait $SP; el synth
timeout 50 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 > $L/dec.txt 2>&1; el "decode rc=$?"; tail -4 $L/dec.txt
safe_end
