#!/usr/bin/env bash
# s21a.sh (device, ~5 min; written in the twentieth session on branch s21-prep, NOT RUN: no device time was
# left). qgemm_gt.cu with one m64nNk16 MMA a k16 step at the piece's width (N = 16 .. 176) instead of up to
# four chunk MMAs (64 + 64 + 32 + 16): its MoE cases against the CPU (LILY_GPU_PF=moegt), e2e and fixtures
# with LILY_CUDA_QG_GT=2, the MoE block at 4096 tokens (main's kernel 1.022 ms forced, 1.006 the old
# default), Nsight metrics of the tensor pipe (main: 29.2 % busy, 2.82 M HGMMA), prefill 1K .. 32K with
# the switch 0 / 2 alternating. Then the narrow form (LILY_QG_GT_NARROW=1: pieces of at most 64 tokens, 32
# accumulators, 122 registers, two blocks an SM) and the warp-specialised form (LILY_QG_GT_WS=1: a producer
# warpgroup dequantises into a shared ring, two consumer warpgroups keep a stage of SS MMAs in flight):
# the MoE block, the tensor pipe's busy fraction, prefill, each against the others. Correctness first:
# the moegt cases include both forms (36 checks).
. .carry/common.sh; synth_bg; safe_start 520
LILY_GPU_PF=moegt timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | head -5
LILY_CUDA_QG_GT=2 e2e_fix
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_CUDA_QG_GT=0; moe LILY_CUDA_QG_GT=2; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_NARROW=1; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_WS=1; done; el moe
M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
for v in "" "LILY_QG_GT_NARROW=1" "LILY_QG_GT_WS=1"; do
  env LILY_CUDA_QG_GT=2 $v LILY_GPU_PF=moe timeout 100 ncu --clock-control none --metrics $M -k regex:qgemm_gt --launch-skip 2 --launch-count 1 $B/lily-gpu-test prefill 5 > $L/ncu_m.txt 2>&1; el "ncu $v rc=$?"
  grep -E "pipe_tensor|hmma.sum|issue_active|duration" $L/ncu_m.txt
done
wait $SP; el synth
# prefill 1K .. 32K: the old kernels, the tokens-as-N kernel forced everywhere, its narrow form, twice each
for i in 1 2; do for cfg in "LILY_CUDA_QG_GT=0" "LILY_CUDA_QG_GT=2" "LILY_CUDA_QG_GT=2 LILY_QG_GT_NARROW=1" "LILY_CUDA_QG_GT=2 LILY_QG_GT_WS=1"; do
  env $cfg timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 1K,2K,4K,8K,32K --decode none --reps 1 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/$cfg /"
done; done; el bench
safe_end
