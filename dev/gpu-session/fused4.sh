#!/usr/bin/env bash
# fused4.sh (device, ~4 min): the one-launch MoE as a block per (expert, 32 intermediate values) with
# split-K partials and a grid barrier: kernel tests, e2e, memcheck and racecheck of the MoE kernel
# tests, decode 4K/32K off/on alternating, ncu of the fused kernel (duration; source counters as CSV).
. .carry/common.sh; synth_bg; safe_start 520
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-260
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch" $L/e2e.txt | cut -c1-330
LILY_GPU_KERNELS=moe timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck moe rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt | head -5
LILY_GPU_KERNELS=moe timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 31 > $L/racecheck.txt 2>&1; el "racecheck moe rc=$?"; grep -E "FAIL|passed|SUMMARY|hazard" $L/racecheck.txt | head -5
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in 0 1 0 1; do LILY_CUDA_MOE_FUSED=$v timeout 60 $BB --decode 4K,32K --out $L/f$v 2>&1 | grep -E "^decode " | sed "s/^/moe_fused=$v /"; done; el bench
NB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 1 --warmup 0 --decode 256"
timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters -k regex:moe_fused --launch-skip 60 --launch-count 1 --import-source yes -o /tmp/ncu_f $NB > $L/ncu_f.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_f.ncu-rep --page details > $L/ncu_f.txt 2>&1; grep -E "Duration|DRAM Throughput|Registers|Warp Cycles Per Issued" $L/ncu_f.txt | head
timeout 60 ncu -i /tmp/ncu_f.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_f.csv 2>/dev/null; xz -9 $OUT/src_f.csv
safe_end
