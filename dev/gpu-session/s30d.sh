#!/usr/bin/env bash
# s30d.sh (device, ~2 min): lm_head's blocks taking their tiles from a counter (LILY_CUDA_GV_STEAL): the kernel
# tests (bitwise against the fixed stride, the counters left zero, timing lines), the chain rows of lm_head,
# decode at 4K and 32K with LILY_CUDA_GV_STEAL 0 / 1 alternating (three pairs), e2e and the HF fixtures.
. .carry/common.sh; safe_start 400
synth_bg
kernels_grep "counter|timing rows=248320"
LILY_CHAIN=lm_head timeout 60 $B/lily-gpu-test chain > $L/chain_lm.txt 2>&1; el "chain lm_head rc=$?"; grep -E "^\|" $L/chain_lm.txt | grep -v "^|---" | cut -c1-160
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GV_STEAL
e2e_fix
grep -E "counter" $L/e2e.txt | cut -c1-200
safe_end
