#!/usr/bin/env bash
# s16f.sh (device, ~2 min; sixteenth session, sixth call): the MoE down projection on the persistent
# kernel against qgemm_wg.cu's tiles by prompt length (rows an expert): pfprof 2K, 8K, 16K with
# LILY_CUDA_QG_WSP 0 and 1 (the 64K breakdown of call 5 had it slower, 168 -> 180 ms).
. .carry/common.sh; synth_bg; safe_start 300; wait $SP; el synth
for v in 0 1; do LILY_CUDA_QG_WSP=$v timeout 120 $B/lily-gpu-test pfprof /tmp/big 2K,8K,16K > $L/pfprof$v.txt 2>&1; el "pfprof wsp=$v rc=$?"; grep -E "plain|moe experts down" $L/pfprof$v.txt; done
safe_end
