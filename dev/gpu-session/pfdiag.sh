#!/usr/bin/env bash
# pfdiag.sh (device, ~4 min): where prefill at 4K goes, finer: pfprof with each in_proj / attention GEMM
# on its own row, then Nsight Compute (speed of light, occupancy, launch stats, warp states, memory) of the
# first GDN layer's GEMMs (in_proj qkv/z/b/a, out_proj, router, MoE gate|up and down, shared expert) and
# of the chunked GDN's two phases, in a 4K prefill of the full-size checkpoint.
. .carry/common.sh; synth_bg; safe_start 560; wait $SP
timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -40
S="--clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis"
timeout 200 ncu $S -k regex:qgemm --launch-count 11 $B/lily-gpu-test pfprof /tmp/big 4K > $L/ncu-qgemm.txt 2>&1; el "ncu qgemm rc=$?"
timeout 150 ncu $S -k regex:gdn_chunk --launch-count 2 $B/lily-gpu-test pfprof /tmp/big 4K > $L/ncu-gdn.txt 2>&1; el "ncu gdn rc=$?"
grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|Registers Per|Grid Size|Dynamic Shared" $L/ncu-*.txt | cut -c1-150 | head -160
safe_end
