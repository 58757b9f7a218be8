#!/usr/bin/env bash
# abl.sh (device, ~1.5 min): what bounds the swapped-operand GEMM (qgemm_rs.cu) near 230 TFLOP/s:
# qgone 4096 x 8192 x 2048 with timing-only ablations (LILY_QG_RS_ABL: 1 no fragment build, 2 no
# activation copies, 4 no code copies, 8 no MMAs; the results are wrong by design), then ncu
# source-level counters of the plain kernel (CSV under $OUT).
. .carry/common.sh; safe_start 300
for t in 128 64; do for ab in 0 1 2 3 6 7 8; do
  echo "abl=$ab $(LILY_QG_RS_ABL=$ab timeout 20 $B/lily-gpu-test qgone 4096 8192 2048 $t 4 | grep qgone)"; done; done; el abl
timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy -k regex:qgemm_rs --launch-count 1 --import-source yes -o /tmp/ncu_rs $B/lily-gpu-test qgone 4096 8192 2048 128 4 > $L/ncu_rs.log 2>&1; el "ncu rs rc=$?"
timeout 60 ncu -i /tmp/ncu_rs.ncu-rep --page details > $L/ncu_rs_details.txt 2>&1; grep -E "Duration|Throughput|Occupancy|Registers|Issue|Ipc|Block Limit|Waves" $L/ncu_rs_details.txt | head -30
timeout 60 ncu -i /tmp/ncu_rs.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_rs.csv 2>/dev/null; xz -9 $OUT/src_rs.csv
safe_end
