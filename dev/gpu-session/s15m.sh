#!/usr/bin/env bash
# s15m.sh (device, ~2 min; fifteenth session, thirteenth call): the session's final build (01df5f4; the
# chunked GDN's SASS as 6276834) against its base (7dddf0a) in one call, alternating: prefill 512, 4K,
# 32K, and the GDN timing table of the final build.
. .carry/common.sh; synth_bg; safe_start 300; ab_old; wait $SP; el synth
LILY_GPU_PF=gdn timeout 120 $B/lily-gpu-test prefill 11 > $L/gdn.txt 2>&1; el "gdn rc=$? $(grep -E 'passed' $L/gdn.txt | tail -1)"
grep -E "^\| (chunked|scan) \| 4096" $L/gdn.txt
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
