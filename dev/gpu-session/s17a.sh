#!/usr/bin/env bash
# s17a.sh (device, ~8 min; seventeenth session, first call): main 833eade (the closing review's wgx_stage
# mend of the sixteenth session, not yet run on the GPU): the prefill tests, e2e, the HF fixtures; then
# the prefill breakdown at 256, 1K and 4K tokens (where a short prompt's time goes).
. .carry/common.sh; safe_start 520
synth_bg
pf_checks
wait $SP; el synth
timeout 200 $B/lily-gpu-test pfprof /tmp/big 256,1K,4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"
grep -E "\||^[A-Za-z]" $L/pfprof.txt | head -150
safe_end
