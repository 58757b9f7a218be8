#!/usr/bin/env bash
# post.sh (device, ~2 min): main after the session's last change: prefill tests, e2e, fixtures;
# the prefill sweep 256 .. 128K.
. .carry/common.sh; synth_bg; safe_start 400
pf_checks
wait $SP
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
safe_end
