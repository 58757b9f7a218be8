#!/usr/bin/env bash
# gv3.sh (device, ~3 min): dev/persist/persist_gv2's ring variants (blocks per SM, slot size, empty
# mbarriers with batched sums against a barrier per chunk), each checked bitwise against gemv_launch;
# then main's decode sweep (256, 4K, 32K, 128K) with the parallel split-KV combine on by default.
. .carry/common.sh; synth_bg; safe_start 560
xz -dc $C/persist_gv2.xz > /tmp/persist_gv2 && chmod +x /tmp/persist_gv2
timeout 120 /tmp/persist_gv2 40 10 > $L/persist_gv2.txt 2>&1; el "persist_gv2 rc=$?"; cat $L/persist_gv2.txt
wait $SP
timeout 300 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/sweep 2>&1 | grep -E "^decode |roofline|ceiling" ; el sweep
safe_end
