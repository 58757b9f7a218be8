#!/usr/bin/env bash
# s20g.sh (device, ~1.5 min; twentieth session, call 8): the closing review's qgemm_gt.cu (the MoE down's
# epilogue only, always scaled): its MoE cases, e2e and the HF fixtures with LILY_CUDA_QG_GT=2 and with
# the defaults, the MoE block at 4096 tokens.
. .carry/common.sh
LILY_GPU_PF=moegt timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | head -5
LILY_CUDA_QG_GT=2 e2e_fix
e2e_fix
for v in 0 2; do LILY_CUDA_QG_GT=$v LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/QG_GT=$v /"; done
