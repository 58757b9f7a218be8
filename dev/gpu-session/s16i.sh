#!/usr/bin/env bash
# s16i.sh (device, ~3 min; sixteenth session, ninth call): dense wide-tile calls on the persistent kernel
# (LILY_CUDA_QG_WSP bit 4; call 8's runs of 5 and 7 had the bit masked off by the option's & 3): pfprof
# 4K with 1 and 5, prefill 512 / 4K / 32K with 1 and 5 alternating.
. .carry/common.sh; synth_bg; safe_start 400; wait $SP; el synth
for v in 1 5; do LILY_CUDA_QG_WSP=$v timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; el "pfprof wsp=$v rc=$?"; grep -E "plain|gemm" $L/pfprof$v.txt | head -14; done
for i in 1 2; do for v in 1 5; do LILY_CUDA_QG_WSP=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none --out $L/ab$v$i 2>&1 | grep -E "^prefill " | sed "s/^/wsp=$v /"; done; done; el bench
safe_end
