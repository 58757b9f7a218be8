#!/usr/bin/env bash
# pfncu.sh (device, ~2.5 min): Nsight Compute source counters of the two prefill kernels that hold 4K back
# most per FLOP, inside `lily-gpu-test pfprof /tmp/big 4K`: the MoE down projection's grouped GEMM (first
# layer, its 128-row launch: qgemm launch 8 with tails on) and the chunked GDN's phase B (first launch).
# Source CSVs (CUDA lines + SASS) come back for the per-line stall aggregation (agg.py).
. .carry/common.sh; synth_bg; safe_start 270; wait $SP
S="--clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source yes"
run() { # name regex skip
  timeout 100 ncu $S -k regex:$2 --launch-skip $3 --launch-count 1 -o /tmp/ncu_$1 $B/lily-gpu-test pfprof /tmp/big 4K > $L/ncu_$1.log 2>&1; el "ncu $1 rc=$?"
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$1.csv 2> $L/src_$1.err; xz -9 $OUT/src_$1.csv
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep > $L/ncu_$1.txt 2>&1; grep -E "^  [a-z_]|Duration|Warp Cycles Per Issued|Throughput" $L/ncu_$1.txt | cut -c1-120 | head -10
}
run down qgemm 8
run scan gdn_chunk_scan 0
safe_end
