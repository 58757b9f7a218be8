#!/usr/bin/env bash
# s37t.sh (device, ~9.5 min; written in the thirty-seventh session, not yet run): the compute-sanitizer runs of e2e
# still open, part 2 (part 1 ran as s39s.sh): memcheck of the groups whose racecheck passed in the thirty-fourth session
# but whose memcheck was cut then (`base`, `moe`, `pf_side`, `qg_rw`, `gdn_inproj`), all at once, 520 s each.
# The carried build (prep.sh after make; before the thirty-ninth session it took ab_prep.sh's gt_old.xz). Beside them,
# the prefill tests' `small` run (their files were split and share dev_buf.cuh since their last run). Still open after
# the thirty-ninth session (its device time ran out).
. .carry/common.sh; export SAN_LIMIT=520; safe_start 560
for g in base moe pf_side qg_rw gdn_inproj; do san_bg memcheck $L/memcheck_$g.txt e2e 19 LILY_GPU_E2E=$g; done
( timeout 400 $B/lily-gpu-test prefill 7 small > $L/prefill_small.txt 2>&1; echo "rc=$?" >> $L/prefill_small.txt ) &
PF=$!
san_wait; wait $PF
for g in base moe pf_side qg_rw gdn_inproj; do san_report $L/memcheck_$g.txt "memcheck $g"; done
grep -E "^FAIL|passed|^rc=" $L/prefill_small.txt | cut -c1-200
safe_end
