#!/usr/bin/env bash
# s18i.sh (device, ~3 min; written in the eighteenth session, NOT RUN: no device time was left). Runs a
# build of branch qgemm-tn (LILY_CUDA_QG_TN, LILY_CUDA_QG_TN_CT and LILY_GPU_PF=tn exist there, not on
# main), with the dev harness carried as .carry/qgemm_sm.xz. Call 8 of that session had qgemm_tn (the
# gate|up of 16-row tiles) 6 % slower end to end at 256 tokens although ~15 % faster alone. Which of
# these explains it:
#   1. its grid (one long block an expert) beside the side stream's shared expert: prefill 256/512 with
#      LILY_CUDA_QG_TN 0 / 1 / 1 and one 128-column tile a block (CT=1), each with the side stream on and
#      off (LILY_CUDA_PF_SIDE=0);
#   2. what bounds the kernels' memory traffic: Nsight Compute of qgemm_tn and qgemm.cu's 16-row tile in
#      the harness (T = 256), memory sections and sector/request counts;
#   3. the harness's variants, among them qgemm_tn's ring form (weights in flight in shared memory,
#      checked bitwise against the register form), at T = 256 and 512.
# The tests of qgemm_tn with CT=1 first (the column-tile walk at one tile a block).
. .carry/common.sh; synth_bg; safe_start 280
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
LILY_CUDA_QG_TN_CT=1 LILY_GPU_PF=tn timeout 60 $B/lily-gpu-test prefill $(date +%s) > $L/tn.txt 2>&1; el "tn tests (ct 1) rc=$?"; grep -E "FAIL|passed" $L/tn.txt | cut -c1-200
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill 256,512 --decode none --reps 3 --warmup 1"
for side in 1 0; do for i in 1 2; do
  LILY_CUDA_PF_SIDE=$side LILY_CUDA_QG_TN=0 timeout 30 $B/lily bench $A --out $L/a 2>&1 | grep -E "^prefill " | sed "s/^/side $side tn0 /"
  LILY_CUDA_PF_SIDE=$side LILY_CUDA_QG_TN=1 timeout 30 $B/lily bench $A --out $L/b 2>&1 | grep -E "^prefill " | sed "s/^/side $side tn1 all /"
  LILY_CUDA_PF_SIDE=$side LILY_CUDA_QG_TN=1 LILY_CUDA_QG_TN_CT=1 timeout 30 $B/lily bench $A --out $L/c 2>&1 | grep -E "^prefill " | sed "s/^/side $side tn1 ct1 /"
done; done; el bench
# ncu: kernel names match without template arguments; qgemm_tn's first launch is the harness's GLU check.
S="--clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --metrics dram__sectors_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
for k in qgemm_tn_kernel qgemm_kernel; do
  LILY_SM_TN=1 timeout 80 ncu $S -k regex:$k --launch-count 1 /tmp/qgemm_sm 256 2 > $L/ncu_$k.txt 2>&1; el "ncu $k rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|sectors|requests" $L/ncu_$k.txt | cut -c1-120 | head -16
done
for T in 256 512; do LILY_SM_TN=1 timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; grep -E "PASS|FAIL|engine|qgemm_tn|variant" $L/qgsm_$T.txt; done
safe_end
