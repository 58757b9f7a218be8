#!/usr/bin/env bash
# s17c.sh (device, ~8 min; seventeenth session, third call): the short tiles' deeper cp.async pipelines
# (5 stages at 16 rows, 4 at 32) against the build before them (.carry/lily_old.xz: the copies found
# once, split-K under its final rule): the prefill tests, e2e, the HF fixtures of the new build; both
# builds' prefill at 256 .. 4K alternating; pfprof of the new one at 256 and 1K.
. .carry/common.sh; safe_start 540
synth_bg; ab_old
pf_checks
grep -E "split-K" $L/prefill.txt | cut -c1-150
wait $SP; el synth
ab_bench 120 --model /tmp/big --backend cuda --no-plot --reps 3 --warmup 1 --prefill 256,512,1K,2K,4K --decode none
timeout 100 $B/lily-gpu-test pfprof /tmp/big 256,1K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"
grep -E "^prefill of|gate\|up|experts down|router|b, a|k, v" $L/pfprof.txt
safe_end
