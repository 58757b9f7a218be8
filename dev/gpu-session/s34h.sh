#!/usr/bin/env bash
# s34h.sh (device, ~9 min): compute-sanitizer racecheck of the whole e2e suite, its six groups (LILY_GPU_E2E) as
# six processes at once (one run of it in sequence has never fit a call's 600 s), plus memcheck of the whole suite
# in a seventh; each group's summary line, the sanitizer's last line and the passed/failed count.
. .carry/common.sh; safe_start 560
for g in base moe attn256 pf_side qg_rw gdn_inproj; do
    ( LILY_GPU_E2E=$g timeout 520 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 17 > $L/rc_$g.txt 2>&1; echo "rc=$?" >> $L/rc_$g.txt ) &
done
( timeout 520 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 17 > $L/mc_e2e.txt 2>&1; echo "rc=$?" >> $L/mc_e2e.txt ) &
wait; el sanitizers
for f in $L/rc_*.txt $L/mc_e2e.txt; do
    echo "== $(basename $f): $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL; $(grep -E 'passed, ' $f | tail -1); $(grep -E 'SUMMARY' $f | tail -1); $(tail -1 $f)"
    grep -E "^FAIL|hazard|Error" $f | head -5 | cut -c1-200
done
safe_end
