#!/usr/bin/env bash
# s16g.sh (device, ~2 min; sixteenth session, seventh call): main with the rows rule (qgemm_wsp_takes):
# the small prefill tests, e2e and the HF fixtures, pfprof 4K and 16K (the down projection's rows), and
# the closing sweep (prefill 256 .. 128K, decode 4K).
. .carry/common.sh; synth_bg; safe_start 400; export LILY_COMMIT=${LILY_COMMIT:-unknown}
timeout 60 $B/lily-gpu-test prefill 5 small > $L/small.txt 2>&1; el "prefill small rc=$?"; grep -E "FAIL|passed" $L/small.txt | cut -c1-200 | head -5
e2e_fix
wait $SP; el synth
timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K,16K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "plain|moe experts" $L/pfprof.txt
timeout 220 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 4K --reps 1 --warmup 1 --out $OUT/cuda-prefill > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
safe_end
