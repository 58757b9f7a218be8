#!/usr/bin/env bash
# s21c.sh (device, ~4 min; twenty-first session, call 3): qgemm_gt.cu with a stage of MMAs kept in flight
# (LILY_QG_GT_ASYNC=1: wait_group 1 while the next stage's fragments are built; SASS: one wait a stage, no
# serialisation). Correctness: the moegt cases (8 passes, two of them the new form), e2e and the fixtures
# with it. Then the MoE block at 4096 tokens, the tensor pipe's busy fraction, and prefill 512 .. 32K,
# the engine's rule with and without it, alternating.
. .carry/common.sh; synth_bg; safe_start 500
LILY_GPU_PF=moegt timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
LILY_QG_GT_ASYNC=1 e2e_fix
LILY_QG_GT_ASYNC=1 LILY_CUDA_QG_GT=2 e2e_fix
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_CUDA_QG_GT=1; moe LILY_CUDA_QG_GT=1 LILY_QG_GT_ASYNC=1; done; el moe
M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
for v in "LILY_QG_GT_ASYNC=0" "LILY_QG_GT_ASYNC=1"; do
  env LILY_CUDA_QG_GT=2 $v LILY_GPU_PF=moe timeout 100 ncu --clock-control none --metrics $M -k regex:qgemm_gt --launch-skip 2 --launch-count 1 $B/lily-gpu-test prefill 5 > $L/ncu_m.txt 2>&1; el "ncu $v rc=$?"
  grep -E "pipe_tensor|hmma.sum|issue_active|duration" $L/ncu_m.txt
done
wait $SP; el synth
for i in 1 2; do for cfg in "LILY_QG_GT_ASYNC=0" "LILY_QG_GT_ASYNC=1"; do
  env $cfg timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,1K,2K,4K,8K,32K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/$cfg /"
done; done; el bench
safe_end
