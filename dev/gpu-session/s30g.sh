#!/usr/bin/env bash
# s30g.sh (device, ~9 min): the closing call of the session's build (lm_head's tiles from a counter on by default):
# kernel tests, e2e, HF fixtures, the decode sweep and the per-kernel table of one 4K step, then racecheck of e2e
# (as far as 400 s take it) beside memcheck of the GEMV kernel tests.
. .carry/common.sh; safe_start 540
synth_bg
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "^FAIL|passed" $L/kernels.txt | cut -c1-200
e2e_fix
wait $SP; el synth
timeout 140 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode |ceiling|copy" $L/sweep.txt | head -12
timeout 60 $B/lily-gpu-test prof /tmp/big > $L/prof.txt 2>&1; el "prof rc=$?"; grep -E "^\|" $L/prof.txt | head -20
LILY_GPU_KERNELS=gemv timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 7 > $L/mc_gemv.txt 2>&1 & M1=$!
timeout 390 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e $(date +%s) > $L/rc_e2e.txt 2>&1; el "racecheck e2e rc=$? (124: cut)"
wait $M1; el "memcheck gemv kernels rc=$? (124: cut)"
for f in mc_gemv rc_e2e; do echo "$f: passed $(grep -c ^PASS $L/$f.txt), failed $(grep -c ^FAIL $L/$f.txt); $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$f.txt | tail -1)"; done
grep -E "^FAIL" $L/rc_e2e.txt | head -3
safe_end
