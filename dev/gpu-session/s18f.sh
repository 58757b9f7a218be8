#!/usr/bin/env bash
# s18f.sh (device, ~2 min; eighteenth session, call 6): Nsight Compute of the short prompts' gate|up
# GEMMs in the dev harness at T = 256: qgemm_tn (2 stages in flight), its 1-stage variant, and
# qgemm.cu's 16-row tile; what bounds them (throughputs, warp states, occupancy).
. .carry/common.sh; safe_start 280
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
S="--clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
run() { # name regex
  timeout 80 ncu $S -k "regex:$2" --launch-count 1 /tmp/qgemm_sm 256 2 > $L/ncu_$1.txt 2>&1; el "ncu $1 rc=$?"
  grep -E "Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Mem Busy|Max Bandwidth|Mem Pipes" $L/ncu_$1.txt | cut -c1-110 | head -30
  grep -iE "stall|est\. speedup" $L/ncu_$1.txt | cut -c1-220 | head -8
}
run tn2 'qgemm_tn_kernel<true, 2, 2>'
run tn1 'qgemm_tn_kernel<true, 2, 1>'
run qg16 'qgemm_kernel'
safe_end
