#!/usr/bin/env bash
# s15a.sh (device, ~5 min; fifteenth session, first call): main 7dddf0a (the closing review's mend of the
# fourteenth session, 5583af0, never run on the GPU): the prefill tests (qgemm's refactored bitwise
# relaunches, the GDN timing table), then the 4K prefill profile as this session's base for the GDN work.
. .carry/common.sh; synth_bg; safe_start 400
timeout 240 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "warp-specialised).*bitwise equal; swapped.*wide tile: bitwise equal" $L/prefill.txt
grep -A12 "GDN prefill (Hv" $L/prefill.txt
wait $SP; el synth
pf_prof 40
safe_end
