#!/usr/bin/env bash
# s28c.sh (device, ~4.5 min): racecheck of e2e on the s28b.sh build, as far as 250 s take it (the
# twenty-eighth session's last device time; s28b.sh's run of it was cut by that call's limit).
. .carry/common.sh; safe_start 270
timeout 250 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 1796285961 > $L/rc_e2e.txt 2>&1; el "racecheck e2e rc=$? (124: cut by the time limit)"
echo "tests passed under racecheck: $(grep -c ^PASS $L/rc_e2e.txt), failed: $(grep -c ^FAIL $L/rc_e2e.txt), hazard lines: $(grep -ci hazard $L/rc_e2e.txt)"
grep -E "^PASS|^FAIL" $L/rc_e2e.txt | cut -c1-110 | tail -4; grep -i "hazard\|SUMMARY" $L/rc_e2e.txt | head -5
safe_end
