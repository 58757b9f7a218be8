#!/usr/bin/env bash
# san_e2e.sh TOOL[,TOOL] GROUP... (device): compute-sanitizer (racecheck, memcheck) of e2e's groups (LILY_GPU_E2E:
# base, select, moe, attn256, pf_side, qg_rw, gdn_inproj), every (tool, group) as its own process, all at once (a
# run of the whole suite in sequence does not fit a call's 600 s); SAN_LIMIT seconds each (default 500). Prints a
# line per run: PASS/FAIL counts, the suite's summary, the sanitizer's summary, the exit status (124: cut).
# Not yet run with the "select" group (split from base in the thirty-fourth session): the next session's call.
. .carry/common.sh; safe_start $(( ${SAN_LIMIT:-500} + 40 ))
IFS=, read -ra tools <<< "$1"; shift
for t in "${tools[@]}"; do for g in "$@"; do
    ( LILY_GPU_E2E=$g timeout ${SAN_LIMIT:-500} compute-sanitizer --tool $t --error-exitcode 9 $B/lily-gpu-test e2e 19 \
        > $L/${t}_$g.txt 2>&1; echo "rc=$?" >> $L/${t}_$g.txt ) &
done; done
wait; el sanitizers
for t in "${tools[@]}"; do for g in "$@"; do f=$L/${t}_$g.txt
    echo "== $t $g: $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL; $(grep -E 'passed, ' $f | tail -1); $(grep -E 'SUMMARY' $f | tail -1); $(tail -1 $f)"
    grep -E "^FAIL|hazard|Error" $f | grep -v SUMMARY | head -5 | cut -c1-200
done; done
safe_end
