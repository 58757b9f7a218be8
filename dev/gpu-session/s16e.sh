#!/usr/bin/env bash
# s16e.sh (device, ~7 min; sixteenth session, fifth call): main's closing sweep (prefill 256 .. 128K and
# decode at 4K), pfprof 4K and 64K, demo fidelity on CUDA.
. .carry/common.sh; synth_bg; safe_start 560; export LILY_COMMIT=${LILY_COMMIT:-a0c1fe6}
wait $SP; el synth
timeout 220 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 4K --reps 1 --warmup 1 --out $OUT/cuda-prefill > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
timeout 100 $B/lily-gpu-test pfprof /tmp/big 4K,64K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "plain|\|" $L/pfprof.txt | head -56
demo_fid
safe_end
