#!/usr/bin/env bash
# s21d.sh (device, ~3 min; twenty-first session, call 4): e2e and the fixtures with the defaults (qgemm_gt.cu
# now keeps a stage of MMAs in flight); where the warps of the two MoE GEMMs at 4096 tokens stall
# (stall_prof) - qgemm_gt (the down projection) and qgemm_wsp. As run, the kernel test's defaults left
# qgemm_gt off (no launch: LILY_CUDA_QG_GT unset) and put the down projection, not the gate|up, on
# qgemm_wsp; s21e.sh profiles the engine's pair.
. .carry/common.sh; safe_start 400
e2e_fix
for k in qgemm_gt qgemm_wsp; do stall_prof $k; done
safe_end
