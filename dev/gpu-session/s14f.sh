#!/usr/bin/env bash
# s14f.sh (device, ~3 min; fourteenth session, sixth call). The prefill sweep of the final build (the
# shared stores and the warp-specialised wide tile on by default), a decode point at 4K as a check that
# decode is unchanged, and pfprof at 64K (the second breakdown length).
. .carry/common.sh; synth_bg; safe_start 400; export LILY_COMMIT=d54de21
wait $SP; el synth
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 4K --reps 1 --warmup 1 --out $OUT/cuda-prefill > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
timeout 90 $B/lily-gpu-test pfprof /tmp/big 64K > $L/pfprof64.txt 2>&1; el "pfprof 64K rc=$?"; grep -E "plain|\|" $L/pfprof64.txt | head -30
safe_end
