#!/usr/bin/env bash
# s43a.sh (device, ~5.5 min; forty-third session): s40a.sh cut to what decides the next change, for a session
# whose device time went on failed starts. The same build (ab_prep.sh with the three dev patches). Order by use:
#   1. the L1 prefetch switch's checks (e2e decodes each LILY_CUDA_GV2_L1PF mode bitwise against the default; the
#      gemv kernel tests run each mode), then its ncu medians and two alternating decode pairs at 4K: a win lands;
#   2. moe_fused's parts that price the remedies on the table: 4 no top-k, 16 no atomics, 8 the wait alone
#      (ncu medians, one decode pair each). s40a.sh's other modes and gemv2's parts wait for a full session.
. .carry/common.sh; safe_start 400
synth_bg
l1pf_checks
wait $SP; el synth
ncu_envs gemv2 - LILY_CUDA_GV2_L1PF=1 LILY_CUDA_GV2_L1PF=3 LILY_CUDA_GV2_L1PF=5
AB_A=0 AB_B="1 3 5" AB_PAIRS=2 DEC_AB=4K dec_ab LILY_CUDA_GV2_L1PF
ncu_envs moe_fused - LILY_CUDA_DEV_MF=4 LILY_CUDA_DEV_MF=16 LILY_CUDA_DEV_MF=8
AB_A=0 AB_B="4 16 8" AB_PAIRS=1 DEC_AB=4K dec_ab LILY_CUDA_DEV_MF
safe_end
