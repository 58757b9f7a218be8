#!/usr/bin/env bash
# s31a.sh (device, ~2.5 min; branch attn-qk, never run yet): the attention layer's q/k norm, RoPE and KV append
# inside the tensor-core attention kernel (LILY_CUDA_ATTN_QK): the kernel tests (test_attn_qk against the qk
# launch + attention), e2e (the head_dim-256 model decoded with it, against the CPU backend) and the HF fixtures,
# decode at 4K and 32K with LILY_CUDA_ATTN_QK 0 / 1 alternating (three pairs), the per-kernel tables of one 4K
# step with it off and on.
. .carry/common.sh; safe_start 400
synth_bg
kernels_grep "attn qk fused|^FAIL"
e2e_fix
grep -E "attn_qk" $L/e2e.txt | cut -c1-300
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_ATTN_QK
prof_ab LILY_CUDA_ATTN_QK "attn|total"
safe_end
