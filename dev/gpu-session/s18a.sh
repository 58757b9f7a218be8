#!/usr/bin/env bash
# s18a.sh (device, ~5 min; eighteenth session, call 1): the short prompts' GEMM prototype's first run
# (qgemm_sm at T = 256/512/1024), then main's checks (751c8f4: the last review's mend, not run), then
# pfprof at 256 and 4K (the warm-up pass of f0a4779, not run).
. .carry/common.sh; synth_bg; safe_start 540
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
for T in 256 512 1024; do timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; tail -30 $L/qgsm_$T.txt; done
pf_checks
wait $SP
timeout 120 $B/lily-gpu-test pfprof /tmp/big 256,4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -70
safe_end
