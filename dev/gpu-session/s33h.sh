#!/usr/bin/env bash
# s33h.sh (device, ~4 min): where the decode GEMVs' time goes, stall by source line, as s33e.sh did for moe_fused
# (which found an L2 round trip between the top-k and a barrier: s33g.sh). Nsight Compute on
# `lily-gpu-test prof /tmp/big` (plain launches), three consecutive gemv2 launches of a GDN layer in the middle
# of the step (in_proj 396 blocks, out_proj 128, router + shared gate/up 81: the grid size says which), and the
# gdn_kernel launch between them.
. .carry/common.sh; synth_bg; safe_start 330; wait $SP
S="--clock-control none --section LaunchStats --section Occupancy --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source yes"
run() { # name regex skip
  timeout 80 ncu $S -k regex:$2 --launch-skip $3 --launch-count 1 -o /tmp/ncu_$1 $B/lily-gpu-test prof /tmp/big > $L/ncu_$1.log 2>&1; el "ncu $1 rc=$?"
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep --page source --csv --print-source cuda,sass > /tmp/src_$1.csv 2> $L/src_$1.err
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep > $L/ncu_$1.txt 2>&1
  grep -E "^  [a-z_]|Duration|Grid Size|Warp Cycles Per Issued|Registers Per|Achieved Occupancy" $L/ncu_$1.txt | cut -c1-110 | head -8
  python3 dev/tools/ncu_agg.py /tmp/src_$1.csv 14 > $L/agg_$1.txt 2>&1; cut -c1-210 $L/agg_$1.txt
  xz -9 -c /tmp/src_$1.csv > $OUT/src_$1.csv.xz
}
run g30 gemv2 30
run g31 gemv2 31
run g32 gemv2 32
run gdn gdn_kernel 10
safe_end
