#!/usr/bin/env bash
# s14g.sh (device, ~2 min; fourteenth session, seventh call). Nsight Compute of the final warp-specialised
# wide tile (qgone 4096 x 8192 x 2048, WG 8): details and source counters (CSV to $OUT), to see what
# bounds it now that its producer stores by shared address and loads its words first.
. .carry/common.sh; safe_start 300
timeout 150 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables -k regex:qgemm_w --launch-skip 1 --launch-count 1 --import-source yes -o /tmp/ncu_8 $B/lily-gpu-test qgone 4096 8192 2048 128 8 > $L/ncu_8.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_8.ncu-rep --page details > $OUT/details_8.txt 2>&1
grep -E "Duration|Throughput|Issue|Ipc|Warp Cycles|highest-utilized" $OUT/details_8.txt | head -20
timeout 60 ncu -i /tmp/ncu_8.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_8.csv 2>/dev/null; xz -9 $OUT/src_8.csv
safe_end
