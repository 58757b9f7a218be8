#!/usr/bin/env bash
# s23b.sh (device, ~5 min; its ablations need branch s23-ws, da3e93c: LILY_GDN_WG_ABL): Nsight Compute of gdn_scan_wg (the chunked GDN's phase B on the warpgroup
# MMA) at the real dims, T = 2048 (the GDN tests' seventh launch of it): throughput, pipes, warp states,
# stall samples by SASS line; then the same for gdn_chunk_scan (mma.sync) with LILY_CUDA_GDN_WG off in
# the test (the variable's own default is on: the test's Dk 128 cases run both, gdn_wg 0 second).
. .carry/common.sh; safe_start 300
prof() { # NAME KERNEL SKIP
    LILY_GPU_PF=gdn timeout 150 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats --section Occupancy \
        --section InstructionStats -k regex:$2 --launch-skip $3 --launch-count 1 -o $L/$1 $B/lily-gpu-test prefill 5 > $L/ncu_$1.txt 2>&1; el "ncu $1 rc=$?"
    ncu -i $L/$1.ncu-rep --page details > $L/$1_details.txt 2>&1
    ncu -i $L/$1.ncu-rep --page raw --csv 2>/dev/null | python3 -c "
import sys,csv
r=list(csv.reader(sys.stdin)); h=r[0]; v=r[-1]
for k,x in zip(h,v):
    if any(s in k for s in ('pipe_tensor','inst_executed_pipe_tensor','sm__pipe_shared_cycles_active','cycles_active.avg','gpc__cycles_elapsed.max')): print(k, x)
" 2>&1 | head -20
    ncu -i $L/$1.ncu-rep --page source --csv --print-source sass > $L/$1_sass.csv 2>&1
    grep -E "Duration|Issue Slots Busy|No Eligible|Eligible Warps|Registers Per|Achieved Occupancy|Tensor|Pipe|Executed Ipc|Shared Memory" $L/$1_details.txt | head -24
    python3 $C/stall.py $L/$1_sass.csv 28
    rm -f $L/$1.ncu-rep
}
prof wg gdn_scan_wg 6
prof mma gdn_chunk_scan 15
# Ablations of gdn_scan_wg (timing only, LILY_GDN_WG_ABL; its tests fail): the chunked GDN at 4096 tokens
# (conv + phase A + phase B), 4 blocks a head. Bits: 1 no Q S0 / M Delta, 2 no W S0, 4 no state update,
# 8 no waits for the copies, 16 no shared stores of Delta / fk Delta / S.
for a in 0 1 2 4 8 16 5 0; do
    LILY_GDN_WG_ABL=$a LILY_GPU_PF=gdn timeout 60 $B/lily-gpu-test prefill 11 > $L/abl$a.txt 2>&1
    echo "abl $a: $(grep -E '^\| chunked \| 4096 \| 4 ' $L/abl$a.txt) $(grep -E '^\| chunked, gdn_wg' $L/abl$a.txt | tail -1)"
done; el ablations
safe_end
