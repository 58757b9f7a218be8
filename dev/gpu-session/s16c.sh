#!/usr/bin/env bash
# s16c.sh (device, ~6 min; sixteenth session, third call): the persistent MoE GEMM's second form
# (qgemm_wsp.cu: an issuing thread with its own X and code rings, the tile list found once): a hang
# check, the MoE block at 4096 tokens with LILY_CUDA_QG_WSP 0..3 alternating and with parts left out
# (LILY_WSP_ABL), pfprof 4K 0 / 3, then the prefill tests and e2e + fixtures with 3.
. .carry/common.sh; synth_bg; safe_start 560
timeout 60 $B/lily-gpu-test prefill 5 small > $L/small.txt 2>&1; rc=$?; el "prefill small rc=$rc"; grep -E "FAIL|passed" $L/small.txt | cut -c1-200 | head
if [ $rc -ne 0 ]; then tail -5 $L/small.txt; safe_end; exit 1; fi
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_CUDA_QG_WSP=0; moe LILY_CUDA_QG_WSP=1; moe LILY_CUDA_QG_WSP=2; moe LILY_CUDA_QG_WSP=3; done
for a in 1 2 4 3 6 7; do moe LILY_CUDA_QG_WSP=3 LILY_WSP_ABL=$a; done; el moe
wait $SP; el synth
for v in 0 3; do LILY_CUDA_QG_WSP=$v timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; el "pfprof wsp=$v rc=$?"; grep -E "plain|moe experts" $L/pfprof$v.txt | head -8; done
timeout 240 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
LILY_CUDA_QG_WSP=3 e2e_fix
safe_end
