#!/usr/bin/env bash
# s20c.sh (device, ~5 min; twentieth session, call 3): qgemm_gt.cu with its epilogue staged through shared
# memory (16-byte stores) and a 5-stage code ring. Its MoE cases (LILY_GPU_PF=moegt), the MoE block at 4096
# tokens (QG_GT 0 / 2, dev knobs), prefill 1K/2K/4K/32K with LILY_CUDA_QG_GT 0 / 1 alternating, pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 560
LILY_GPU_PF=moegt timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | head -5
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
moe LILY_CUDA_QG_GT=0; moe LILY_CUDA_QG_GT=2; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_DEV=4; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_DEV=1
moe LILY_CUDA_QG_GT=2 LILY_QG_GT_WGS=3; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_PARTS=4; moe LILY_CUDA_QG_GT=0; moe LILY_CUDA_QG_GT=2; el moe
wait $SP; el synth
env_ab LILY_CUDA_QG_GT --model /tmp/big --backend cuda --no-plot --prefill 1K,2K,4K,32K --decode none --reps 1 --warmup 1
LILY_CUDA_QG_GT=1 pf_prof 8
safe_end
