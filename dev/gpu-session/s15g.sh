#!/usr/bin/env bash
# s15g.sh (device, ~2 min; fifteenth session, seventh call). Nsight Compute of the chunked GDN's phase A
# and B as landed (62066aa: fragment-order operands), the first GDN layer of a 4K prefill: details and
# source counters to $OUT.
. .carry/common.sh; synth_bg; safe_start 300; wait $SP
timeout 200 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats -k regex:gdn_chunk --launch-count 2 --import-source yes -o /tmp/ncu_g $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 0 --prefill 4K --decode none > $L/ncu_g.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_g.ncu-rep --page details > $OUT/details_g.txt 2>&1
grep -E "gdn_chunk|Duration|Issue Slots|Warp Cycles|highest-utilized|Achieved Occ|No Eligible|Active Warps" $OUT/details_g.txt | head -40
timeout 60 ncu -i /tmp/ncu_g.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_g.csv 2>/dev/null; xz -9 $OUT/src_g.csv
safe_end
