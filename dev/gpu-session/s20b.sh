#!/usr/bin/env bash
# s20b.sh (device, ~4 min; twentieth session, call 2): what bounds the tokens-as-N down projection
# (qgemm_gt.cu: 15.58 ms at 4K against qgemm_wsp.cu's 11.73). The MoE block at 4096 tokens (LILY_GPU_PF=moe)
# with LILY_CUDA_QG_GT 0 / 2 and the kernel's dev knobs (LILY_QG_GT_DEV: 1 no MMAs, 2 no code copies, 4 no
# stores, 8 the copies with an L2::256B hint; LILY_QG_GT_PARTS, _WGS, _NMAX); then Nsight Compute of one
# launch of the kernel (details; source counters as CSV).
. .carry/common.sh; safe_start 560
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
moe LILY_CUDA_QG_GT=0; moe LILY_CUDA_QG_GT=2
for d in 8 1 2 4 6 7; do moe LILY_CUDA_QG_GT=2 LILY_QG_GT_DEV=$d; done
moe LILY_CUDA_QG_GT=2 LILY_QG_GT_PARTS=1; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_PARTS=4; moe LILY_CUDA_QG_GT=2 LILY_QG_GT_WGS=3
moe LILY_CUDA_QG_GT=2 LILY_QG_GT_NMAX=128; moe LILY_CUDA_QG_GT=0; moe LILY_CUDA_QG_GT=2; el moe
LILY_CUDA_QG_GT=2 LILY_GPU_PF=moe timeout 200 ncu --clock-control none --cache-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy --section SourceCounters --import-source yes -k regex:"qgemm_gt" --launch-skip 2 --launch-count 1 -o /tmp/ncu_gt $B/lily-gpu-test prefill 5 > $L/ncu_gt.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_gt.ncu-rep --page details > $OUT/details_gt.txt 2>&1
grep -E "Duration|Throughput|Pipe|Issue|Warp Cycles|Eligible|Bank|Registers|Achieved|Hit Rate|Stall|L2|DRAM" $OUT/details_gt.txt | head -70
timeout 60 ncu -i /tmp/ncu_gt.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_gt.csv 2>/dev/null; xz -9 $OUT/src_gt.csv
safe_end
