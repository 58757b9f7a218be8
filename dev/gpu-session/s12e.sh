#!/usr/bin/env bash
# s12e.sh (device, ~4 min; twelfth session): the closing sweeps of the final build (prefill 256..128K,
# decode 256..128K).
. .carry/common.sh; synth_bg; safe_start 400
wait $SP; el synth
timeout 170 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dsweep 2>&1 | grep -E "^decode |^#|tok/s|ceiling" | head -10; el "decode sweep"
safe_end
