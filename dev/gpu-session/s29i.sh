#!/usr/bin/env bash
# s29i.sh (device, ~5 min): the closing checks of the session's build (MoE fixed-point sum on, gdn_out off
# by default): kernel tests, e2e, HF fixtures, memcheck of the kernels and of e2e (in parallel, as far as
# 150 s take them), then the decode sweep.
. .carry/common.sh; safe_start 330
synth_bg
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "^FAIL|passed" $L/kernels.txt | cut -c1-200
e2e_fix
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 7 > $L/mc_k.txt 2>&1 & M1=$!
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 7 > $L/mc_e.txt 2>&1; el "memcheck e2e rc=$? (124: cut)"
wait $M1; el "memcheck kernels rc=$? (124: cut)"
for f in mc_k mc_e; do echo "$f: passed $(grep -c ^PASS $L/$f.txt), failed $(grep -c ^FAIL $L/$f.txt); $(grep -E 'ERROR SUMMARY' $L/$f.txt | tail -1)"; done
wait $SP; el synth
timeout 140 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode |ceiling|copy" $L/sweep.txt | head -12
safe_end
