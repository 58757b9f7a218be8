#!/usr/bin/env bash
# s21e.sh (device, ~1 min; twenty-first session, call 5): s21d's stall profile for the kernels the engine
# runs at 4096 tokens: qgemm_gt (the down projection, the engine's rule) and qgemm_wg_kernel (the gate|up,
# 192-row tiles).
. .carry/common.sh; safe_start 300
for k in qgemm_gt qgemm_wg_kernel; do stall_prof $k LILY_CUDA_QG_GT=1; done
safe_end
