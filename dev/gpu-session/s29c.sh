#!/usr/bin/env bash
# s29c.sh (device, ~2 min): the MoE's fixed-point sum (LILY_CUDA_MOE_ACC): the kernel tests (the gemv fold and
# moe_fused acc lines), e2e and the HF fixtures with it on, decode at 4K with it off and on, alternating (one
# binary), and the chain row of moe_fused.
. .carry/common.sh; safe_start 585
synth_bg
kernels_grep "fixed-point"
e2e_fix; grep -E "fixed-point|front" $L/e2e.txt | cut -c1-300
wait $SP; el synth
dec_ab LILY_CUDA_MOE_ACC
LILY_CHAIN=experts timeout 60 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -E "^\|" $L/chain.txt | head -12
safe_end
