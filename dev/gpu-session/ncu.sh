#!/usr/bin/env bash
# ncu.sh (device): hardware counters of the kernels that hold prefill and decode back, to measure
# before redesigning them (docs/PERF.md "where it stands"). Nsight Compute with --clock-control none
# (leave the clocks alone): speed of light, occupancy, warp stall reasons, instruction mix of
#   - the fused-dequant GEMM (qgemm) at the full model's shapes (lily-gpu-test prefill SEED bench),
#   - the two GDN chunked kernels (phase A prep, phase B scan) at T = 4096,
#   - the decode GEMVs (gemv / gemv2) at the real shapes of lily-gpu-test kernels.
# Reports as text in $OUT/ncu-*.txt. Each ncu run replays kernels many times: keep the counts small.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b && tar xJf $C/bin.tar.xz -C /tmp/b
S="--clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
timeout 200 ncu $S -k regex:qgemm --launch-skip 40 --launch-count 6 /tmp/b/lily-gpu-test prefill 5 bench > $OUT/ncu-qgemm.txt 2>&1; echo "qgemm rc=$?"
timeout 150 ncu $S -k regex:gdn_chunk --launch-skip 20 --launch-count 4 /tmp/b/lily-gpu-test prefill 5 bench > $OUT/ncu-gdn.txt 2>&1; echo "gdn rc=$?"
timeout 150 ncu $S -k regex:gemv --launch-skip 30 --launch-count 8 /tmp/b/lily-gpu-test kernels 5 > $OUT/ncu-gemv.txt 2>&1; echo "gemv rc=$?"
grep -E "^\s+[a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Stall" $OUT/ncu-*.txt | cut -c1-160 | head -150
