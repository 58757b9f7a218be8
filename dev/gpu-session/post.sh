#!/usr/bin/env bash
# post.sh (device, ~2 min): main after the session's last change: prefill tests, e2e, fixtures;
# the prefill sweep 256 .. 128K.
. .carry/common.sh; synth_bg; safe_start 400
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
safe_end
