#!/usr/bin/env bash
# s13f.sh (device, ~5 min; thirteenth session, call 8): main's closing checks not run yet this session:
# the prefill kernel tests, then `lily-gpu-test full /tmp/big` (per-kernel time of a 4K step, the
# ablation table with the tensor-core attention's row).
. .carry/common.sh; synth_bg; safe_start 400
timeout 200 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
wait $SP; el synth
timeout 170 $B/lily-gpu-test full /tmp/big > $L/full.txt 2>&1; el "full rc=$?"; grep -E "^\||FAIL|PASS" $L/full.txt | head -60
safe_end
