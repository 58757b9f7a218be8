#!/usr/bin/env bash
# s33e.sh (device, ~3 min): where one moe_fused launch's ~15 us go, now that s33d.sh showed it is not DRAM-bound
# (two thirds of its bytes from L2 saved 1.3 of 15.9 us). Nsight Compute on `lily-gpu-test prof /tmp/big` (the
# per-kernel profile, plain launches), the 6th moe_fused launch: warp states, source counters per SASS line
# (dev/tools/ncu_agg.py), speed of light, occupancy.
. .carry/common.sh; synth_bg; safe_start 300; wait $SP
S="--clock-control none --section LaunchStats --section Occupancy --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source yes"
timeout 150 ncu $S -k regex:moe_fused --launch-skip 5 --launch-count 1 -o /tmp/ncu_mf $B/lily-gpu-test prof /tmp/big > $L/ncu_mf.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_mf.ncu-rep --page source --csv --print-source cuda,sass > /tmp/src_mf.csv 2> $L/src_mf.err
timeout 60 ncu -i /tmp/ncu_mf.ncu-rep > $L/ncu_mf.txt 2>&1
grep -E "^  [a-z_]|Duration|Warp Cycles Per Issued|Throughput|Achieved Occupancy|Registers Per|Stall|Issued Warp" $L/ncu_mf.txt | cut -c1-120 | head -40
python3 dev/tools/ncu_agg.py /tmp/src_mf.csv 30 > $L/agg_mf.txt 2>&1; cut -c1-230 $L/agg_mf.txt
xz -9 -c /tmp/src_mf.csv > $OUT/src_mf.csv.xz
safe_end
