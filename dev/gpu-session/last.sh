#!/usr/bin/env bash
# last.sh (device, ~2.5 min): for the next session's plan. Nsight Compute source counters of the wgmma flash
# attention v3 in a 32K prefill (second 16K chunk: launch 10) and of GDN phase A (gdn_chunk_prep) in a 4K
# prefill; then the MoE tails switch at the 16384-token chunk (32K prefill, LILY_CUDA_MOE_TAILS 0/1).
. .carry/common.sh; synth_bg; safe_start 270; wait $SP
S="--clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy --import-source yes"
run() { # name regex len skip
  timeout 100 ncu $S -k regex:$2 --launch-skip $4 --launch-count 1 -o /tmp/ncu_$1 $B/lily-gpu-test pfprof /tmp/big $3 > $L/ncu_$1.log 2>&1; el "ncu $1 rc=$?"
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$1.csv 2> $L/src_$1.err; xz -9 $OUT/src_$1.csv
  timeout 60 ncu -i /tmp/ncu_$1.ncu-rep > $L/ncu_$1.txt 2>&1; grep -E "Duration|Warp Cycles Per Issued|Compute \(SM\) Th|L2 Cache Th|Achieved Occ" $L/ncu_$1.txt | cut -c1-100 | head -8
}
run fw fw_kernel 32K 10
run prep gdn_chunk_prep 4K 0
env_ab LILY_CUDA_MOE_TAILS --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 32K
safe_end
