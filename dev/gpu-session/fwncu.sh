#!/usr/bin/env bash
# fwncu.sh (device, ~2 min): Nsight Compute source counters of the wgmma flash attention (fw_kernel) in a
# 32K prefill, chunk 8 (4096 queries at 28K of context: launch 70), and its summary at 4K (launch 0).
. .carry/common.sh; synth_bg; safe_start 270; wait $SP
S="--clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --import-source yes"
run() { # name len skip
  timeout 150 ncu $S -k regex:fw_kernel --launch-skip $3 --launch-count 1 -o /tmp/ncu_$1 $B/lily-gpu-test pfprof /tmp/big $2 > $L/ncu_$1.log 2>&1; el "ncu $1 rc=$?"
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$1.csv 2> $L/src_$1.err; xz -9 $OUT/src_$1.csv
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep > $L/ncu_$1.txt 2>&1; grep -E "Duration|Warp Cycles Per Issued|Throughput|Pipe|Issue Slots|Eligible" $L/ncu_$1.txt | cut -c1-120 | head -24
}
run long 32K 70
run short 4K 0
safe_end
