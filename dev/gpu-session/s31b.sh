#!/usr/bin/env bash
# s31b.sh (device, ~5 min; branch attn-qk): LILY_CUDA_ATTN_QK reworked after s31a (-1.7 % at 4K): RoPE's factors and
# the norms' gains in shared memory before the wait, the new k/v row made by the producer warp while the consumers
# make q. memcheck of the head_dim-256 e2e group (s31a's e2e stopped after it: "cannot create a stream"), the kernel
# tests, the whole e2e and the fixtures, decode A/B at 4K and 32K (three pairs), the per-kernel tables. Then a
# timing-only A/B of moe_fused's down slice by one bulk copy (LILY_CUDA_MF_DSL).
. .carry/common.sh; safe_start 540
synth_bg
LILY_GPU_E2E=attn256 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 5 > $L/mc_attn.txt 2>&1; el "memcheck e2e attn256 rc=$?"
grep -E "PASS|FAIL|ERROR SUMMARY|Invalid|at 0x|by thread" $L/mc_attn.txt | cut -c1-300 | head -20
kernels_grep "attn qk fused|^FAIL"
e2e_fix
grep -E "attn_qk" $L/e2e.txt | cut -c1-400
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_ATTN_QK
prof_ab LILY_CUDA_ATTN_QK "attn|total"
# TIMING ONLY (wrong logits): moe_fused's down slice as one contiguous bulk copy (a slice-major layout's bytes) against
# the tensor-map boxes of 16 bytes x 256 rows: is the slice's ~4K small requests a block what slows the MoE's stream?
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K dec_ab LILY_CUDA_MF_DSL
prof_ab LILY_CUDA_MF_DSL "moe|total"
safe_end
