#!/usr/bin/env bash
# fast2.sh (device, ~2.5 min): the top-k's divisions by the lanes that own the rounds, the GDN conv's
# ring slots computed once. All kernel tests, e2e, HF fixtures; decode 4K/32K alternating the
# previous build (.carry/lily_old.xz) and this one.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
ab_checks
wait $SP
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1 --decode 4K,32K
LILY_CHAIN=conv timeout 60 $B/lily-gpu-test chain 2>&1 | grep -E "GDN conv" | head -3
safe_end
