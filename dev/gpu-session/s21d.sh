#!/usr/bin/env bash
# s21d.sh (device, ~3 min; twenty-first session, call 4): e2e and the fixtures with the defaults (qgemm_gt.cu
# now keeps a stage of MMAs in flight); where the warps of the two MoE GEMMs at 4096 tokens stall
# (Nsight Compute: warp states, scheduler, stall samples by SASS line) - qgemm_gt (the down projection)
# and qgemm_wsp (the gate|up).
. .carry/common.sh; safe_start 400
e2e_fix
for k in qgemm_gt qgemm_wsp; do
  LILY_GPU_PF=moe timeout 150 ncu --clock-control none --section WarpStateStats --section SchedulerStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis -k regex:$k --launch-skip 2 --launch-count 1 -o $L/$k $B/lily-gpu-test prefill 5 > $L/ncu_$k.txt 2>&1; el "ncu $k rc=$?"
  ncu -i $L/$k.ncu-rep --page details > $L/${k}_details.txt 2>&1
  ncu -i $L/$k.ncu-rep --page source --csv --print-source sass > $L/${k}_sass.csv 2>&1; el "source rc=$? $(wc -c < $L/${k}_sass.csv)"
  grep -iE "stall|Warp Cycles|Issued|Eligible|Active Warps|No Eligible|Throughput|Bandwidth|Busy" $L/${k}_details.txt | head -40
done
rm -f $L/*.ncu-rep
safe_end
