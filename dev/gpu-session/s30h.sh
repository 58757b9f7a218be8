#!/usr/bin/env bash
# s30h.sh (device, ~40 s): the decode sweep of main's final build of the thirtieth session (its kernels bitwise
# those of 07d1141: every experiment of the session left on a branch or removed).
. .carry/common.sh; safe_start 100
synth_bg; wait $SP; el synth
timeout 80 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode |ceiling|copy" $L/sweep.txt | head -12
safe_end
