#!/usr/bin/env bash
# s22a.sh (device, ~4 min; ran on branch s22-prep, c2b7c70: its switches are not on main, where none of the three landed). Three changes, each
# behind a switch, default off:
# 1. qgemm_gt.cu's wide form on three warpgroups with a stage in flight (LILY_QG_GT_WGS=3; 168 registers).
# 2. The MoE gate|up's 192-row tile dequantising in 1024 quarters, at most 3 a thread (LILY_QG_DQ4=1).
# 3. The gate|up's rows copied by its 192-row tiles straight from xn by one-row tensor-map copies, no
#    gather kernel (LILY_CUDA_MOE_GATHER=2; xn, 16 MB at 4K, stays in L2 where the gathered copy is 134 MB).
# Correctness first (moegt's 9 passes; moedq4: the default MoE pass, its quarters twin and the three
# row-copy passes; e2e and the fixtures with all three on), then the MoE block and prefill, alternating.
. .carry/common.sh; synth_bg; safe_start 540
LILY_GPU_PF=moedq4 timeout 90 $B/lily-gpu-test prefill $(date +%s) > $L/moedq4.txt 2>&1; el "moedq4 rc=$?"; grep -E "FAIL|passed|^\(" $L/moedq4.txt | cut -c1-160 | head -12
LILY_GPU_PF=moegt timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
LILY_QG_GT_WGS=3 LILY_QG_DQ4=1 LILY_CUDA_MOE_GATHER=2 e2e_fix
moe() { env "$@" LILY_CUDA_QG_GT=1 LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_QG_GT_WGS=2; moe LILY_QG_GT_WGS=3; moe LILY_QG_DQ4=1; moe LILY_CUDA_MOE_GATHER=2; moe LILY_CUDA_MOE_GATHER=2 LILY_QG_DQ4=1; done; el moe
wait $SP; el synth
for i in 1 2; do for cfg in "LILY_QG_GT_WGS=2" "LILY_QG_GT_WGS=3" "LILY_QG_DQ4=1" "LILY_CUDA_MOE_GATHER=2" "LILY_CUDA_MOE_GATHER=2 LILY_QG_DQ4=1 LILY_QG_GT_WGS=3"; do
  env $cfg timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 1K,4K,16K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/$cfg /"
done; done; el bench
safe_end
