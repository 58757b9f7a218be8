#!/usr/bin/env bash
# s14b.sh (device, ~3 min; fourteenth session, second call). Nsight Compute of one wide-tile GEMM,
# 4096 x 8192 x 2048: qgemm_wg.cu's kernel (qgone WG 5) against the warp-specialised one (WG 8); the
# details page and the source counters (CSV, to $OUT) of each.
. .carry/common.sh; safe_start 400
for w in 5 8; do
  timeout 150 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables -k regex:qgemm_w --launch-skip 1 --launch-count 1 --import-source yes -o /tmp/ncu_$w $B/lily-gpu-test qgone 4096 8192 2048 128 $w > $L/ncu_$w.log 2>&1 || \
  timeout 150 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis -k regex:qgemm_w --launch-skip 1 --launch-count 1 --import-source yes -o /tmp/ncu_$w $B/lily-gpu-test qgone 4096 8192 2048 128 $w > $L/ncu_$w.log 2>&1
  el "ncu wg=$w rc=$?"
  timeout 60 ncu -i /tmp/ncu_$w.ncu-rep --page details > $OUT/details_$w.txt 2>&1
  grep -E "Duration|Throughput|Pipe|Issue|Ipc|Bank|Shared|Stall|Warp Cycles|Eligible" $OUT/details_$w.txt | head -40
  timeout 60 ncu -i /tmp/ncu_$w.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$w.csv 2>/dev/null; xz -9 $OUT/src_$w.csv
done
safe_end
