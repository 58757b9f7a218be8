#!/usr/bin/env bash
# s20a.sh (device, ~8 min; twentieth session, call 1). Main's unrun closing mend (b45ad38) and branch s20's
# two changes: the GDN gated norm 8 values a lane (LILY_CUDA_GN_VEC, default 1) and the MoE down projection
# with the tokens as N (qgemm_gt.cu, LILY_CUDA_QG_GT, default 0 while unmeasured).
#   1. every prefill kernel test (the gated-norm shapes; the MoE cases with qgemm_gt in three shapes), e2e, fixtures;
#   2. the MoE block at 4096 tokens (full size), LILY_CUDA_QG_GT 0 / 2;
#   3. prefill 4K / 32K with LILY_CUDA_QG_GT 0 / 1 alternating; pfprof 4K with it on.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks
for v in 0 2 0 2; do LILY_CUDA_QG_GT=$v LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 > $L/moe_$v.txt 2>&1; el "moe block QG_GT=$v rc=$?"; grep -E "MoE|moe|ms" $L/moe_$v.txt | tail -4; done
wait $SP; el synth
env_ab LILY_CUDA_QG_GT --model /tmp/big --backend cuda --no-plot --prefill 4K,32K --decode none --reps 1 --warmup 1
LILY_CUDA_QG_GT=1 pf_prof 26
safe_end
