#!/usr/bin/env bash
# s20f.sh (device, ~2 min; twentieth session, call 7): the tensor pipe's busy fraction in the MoE down
# projection, tokens as N (qgemm_gt.cu; also without its copies and stores, LILY_QG_GT_DEV=6) against
# qgemm_wsp.cu: Nsight Compute metrics of one launch each in the MoE block at 4096 tokens.
. .carry/common.sh
M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__warps_active.avg.per_cycle_active
for v in "LILY_CUDA_QG_GT=2" "LILY_CUDA_QG_GT=2 LILY_QG_GT_DEV=6" "LILY_CUDA_QG_GT=0"; do
  k=qgemm_gt; [ "$v" = "LILY_CUDA_QG_GT=0" ] && k=qgemm_wsp
  env $v LILY_GPU_PF=moe timeout 100 ncu --clock-control none --metrics $M -k regex:$k --launch-skip 2 --launch-count 1 $B/lily-gpu-test prefill 5 > $L/ncu_m.txt 2>&1; el "$v rc=$?"
  grep -E "pipe_tensor|hmma.sum|issue_active|duration|warps_active" $L/ncu_m.txt
done
