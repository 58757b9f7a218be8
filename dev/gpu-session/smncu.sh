#!/usr/bin/env bash
# smncu.sh (device, ~3 min; written in the seventeenth session for the next one): why the MoE's 16-row
# grouped GEMM of a 256-token prompt streams its weights at ~1.6 TB/s (docs/PERF.md, seventeenth
# session). Nsight Compute on `lily-gpu-test pfprof /tmp/big 256`: the first gate|up launch of the
# 16-row tile (qgemm_kernel<1,1,4,1>) and the first down launch, with the launch statistics (waves:
# 2048 blocks at 5 an SM are ~3.1 waves, so the last one runs a tenth full), occupancy, warp states and
# source counters by SASS line (dev/tools/ncu_agg.py). Hypotheses to tell apart: the wave tail; the
# per-stage __syncthreads with 4 warps a block; too few bytes in flight (3 stages of 7 KB a block).
. .carry/common.sh; synth_bg; safe_start 270; wait $SP
S="--clock-control none --section LaunchStats --section Occupancy --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source yes"
run() { # name regex skip
  timeout 100 ncu $S -k regex:$2 --launch-skip $3 --launch-count 1 -o /tmp/ncu_$1 $B/lily-gpu-test pfprof /tmp/big 256 > $L/ncu_$1.log 2>&1; el "ncu $1 rc=$?"
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$1.csv 2> $L/src_$1.err; xz -9 $OUT/src_$1.csv
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep > $L/ncu_$1.txt 2>&1
  grep -E "^  [a-z_]|Duration|Warp Cycles Per Issued|Throughput|Waves Per SM|Achieved Occupancy|Block Limit|Registers Per" $L/ncu_$1.txt | cut -c1-120 | head -24
}
# Launch order of that kernel in the first GDN layer: b and a (split-K at 16-row tiles), then the MoE's
# gate|up and down. Check each log's grid size before trusting the letters (gate|up: ~256 x 8 x 1).
run gu 'qgemm_kernel<1, 1, 4, 1>' 2
run dn 'qgemm_kernel<1, 1, 4, 1>' 3
safe_end
