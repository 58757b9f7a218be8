#!/usr/bin/env bash
# s21e.sh (device, ~1 min; twenty-first session, call 5): s21d's stall profile for the kernels the engine
# runs at 4096 tokens: qgemm_gt (the down projection, the engine's rule) and qgemm_wg_kernel (the gate|up,
# 192-row tiles).
. .carry/common.sh; safe_start 300
for k in qgemm_gt qgemm_wg_kernel; do
  LILY_CUDA_QG_GT=1 LILY_GPU_PF=moe timeout 150 ncu --clock-control none --section WarpStateStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy -k regex:$k --launch-skip 2 --launch-count 1 -o $L/$k $B/lily-gpu-test prefill 5 > $L/ncu_$k.txt 2>&1; el "ncu $k rc=$?"
  ncu -i $L/$k.ncu-rep --page details > $L/${k}_details.txt 2>&1
  ncu -i $L/$k.ncu-rep --page source --csv --print-source sass > $L/${k}_sass.csv 2>&1; el "source rc=$? $(wc -c < $L/${k}_sass.csv)"
  grep -E "Duration|Issue Slots Busy|No Eligible|Eligible Warps|Registers Per|Block Size|Grid Size|Achieved Occupancy" $L/${k}_details.txt | head -12
done
rm -f $L/*.ncu-rep
safe_end
