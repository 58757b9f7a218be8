#!/usr/bin/env bash
# s16h.sh (device, ~7 min; sixteenth session, eighth call): the 2-warpgroup persistent kernel
# (qgemm_wsp.cu, m64n256, 128-row tiles) for the MoE gate|up on the all-rows map (LILY_CUDA_QG_WSP bit
# 2) and for dense wide-tile calls (bit 4): a hang check, the MoE block at 4096 tokens with 1 and 3,
# pfprof 4K with 1 / 3 / 5 / 7, prefill 512 / 4K / 32K with 1 / 3 / 5 / 7, then the prefill tests.
. .carry/common.sh; synth_bg; safe_start 570
timeout 60 $B/lily-gpu-test prefill 5 small > $L/small.txt 2>&1; rc=$?; el "prefill small rc=$rc"; grep -E "FAIL|passed" $L/small.txt | cut -c1-250 | head
if [ $rc -ne 0 ]; then tail -5 $L/small.txt; safe_end; exit 1; fi
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_CUDA_QG_WSP=1; moe LILY_CUDA_QG_WSP=3; done; el moe
wait $SP; el synth
for v in 1 3 5 7; do LILY_CUDA_QG_WSP=$v timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; el "pfprof wsp=$v rc=$?"; grep -E "plain|moe experts|gemm" $L/pfprof$v.txt | head -14; done
for v in 1 3 5 7; do LILY_CUDA_QG_WSP=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none --out $L/ab$v 2>&1 | grep -E "^prefill " | sed "s/^/wsp=$v /"; done; el bench
timeout 240 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-250 | head
grep -E "persistent" $L/prefill.txt | head -8 | cut -c1-250
safe_end
