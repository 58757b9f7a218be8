#!/usr/bin/env bash
# s31a.sh (device, ~5 min; branch attn-qk rebased on main b4fa884): the attention layer's q/k norm, RoPE and KV
# append inside the tensor-core attention kernel (LILY_CUDA_ATTN_QK): the kernel tests (test_attn_qk against the qk
# launch + attention; also the gdn_out and moe_front cases of d811f6f's shared gated_norm8), e2e (the head_dim-256
# model decoded with it, against the CPU backend) and the HF fixtures, decode at 4K and 32K with LILY_CUDA_ATTN_QK
# 0 / 1 alternating (three pairs), the per-kernel tables of one 4K step with it off and on. Then Nsight Compute of
# one moe_fused launch of the profiled step: DRAM bytes read against the bytes its weights hold (is the down
# slice's 16-byte-a-row read wasting DRAM sectors?).
. .carry/common.sh; safe_start 520
synth_bg
kernels_grep "attn qk fused|gdn_out|front|^FAIL"
e2e_fix
grep -E "attn_qk|gdn_out|front" $L/e2e.txt | cut -c1-300
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_ATTN_QK
prof_ab LILY_CUDA_ATTN_QK "attn|total"
timeout 150 ncu --clock-control none -k regex:moe_fused --launch-skip 20 --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $B/lily-gpu-test prof /tmp/big > $L/ncu_mf.txt 2>&1; el "ncu moe_fused rc=$?"
grep -E "moe_fused|gpu__time|dram__|lts__" $L/ncu_mf.txt | cut -c1-160 | head -30
safe_end
