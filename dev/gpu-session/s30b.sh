#!/usr/bin/env bash
# s30b.sh (device, ~2 min): gemv2 prefetching its tiles ahead to L2 (LILY_CUDA_GV2_PFN): the kernel tests'
# lines of it (bitwise against the plain launch, and the timing lines), the chain rows of lm_head and GDN
# in_proj, decode at 4K and 32K with LILY_CUDA_GV2_PFN 0 / 1 and 0 / 2 alternating; then the early PDL
# trigger (LILY_CUDA_PDL_EARLY 0 / 1 / 2, last measured on 2026-11-29, before most of today's kernels).
# Ran on branch exp-gv-mc (LILY_CUDA_GV2_PFN is not on main: lm_head slower, decode within noise).
. .carry/common.sh; safe_start 400
synth_bg
kernels_grep "timing|ahead to L2: DIFF"
for c in lm_head "GDN in_proj"; do
    LILY_CHAIN="$c" timeout 60 $B/lily-gpu-test chain > "$L/chain_$c.txt" 2>&1; el "chain $c rc=$?"; grep -E "^\|" "$L/chain_$c.txt" | grep -v "^|---" | cut -c1-160
done
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=2 DEC_AB=4K,32K dec_ab LILY_CUDA_GV2_PFN
AB_A=0 AB_B=2 AB_PAIRS=2 DEC_AB=4K,32K dec_ab LILY_CUDA_GV2_PFN
AB_A=0 AB_B=1 AB_PAIRS=2 DEC_AB=4K dec_ab LILY_CUDA_PDL_EARLY
AB_A=0 AB_B=2 AB_PAIRS=1 DEC_AB=4K dec_ab LILY_CUDA_PDL_EARLY
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|ahead" $L/e2e.txt | cut -c1-200
safe_end
