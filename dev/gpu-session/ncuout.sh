#!/usr/bin/env bash
# ncuout.sh (device, ~1.5 min): Nsight Compute source counters of gemv2 as GDN out_proj (gated-norm
# prologue, 2048 x 4096) and as the router (RMS norm), one launch each from the chain benchmark,
# exported as source CSV (CUDA lines + SASS) for the per-line stall aggregation.
. .carry/common.sh; safe_start 250
for fam in "GDN out_proj" "router"; do
  n=$(echo $fam | tr ' ' _)
  LILY_CHAIN="$fam" timeout 100 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight -k regex:gemv2 --launch-skip 20 --launch-count 1 --import-source yes -o /tmp/ncu_$n $B/lily-gpu-test chain > $L/ncu_$n.log 2>&1; el "ncu $n rc=$?"
  timeout 60 ncu -i /tmp/ncu_$n.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$n.csv 2> $L/src_$n.err; xz -9 $OUT/src_$n.csv
  timeout 60 ncu -i /tmp/ncu_$n.ncu-rep > $L/ncu_$n.txt 2>&1; grep -E "Duration|Stall|Issue Slots|Warp Cycles Per Issued" $L/ncu_$n.txt | head -12
done
safe_end
