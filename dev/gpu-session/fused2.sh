#!/usr/bin/env bash
# fused2.sh (device, ~5 min): the one-launch MoE with one or two groups of 8 warps a block
# (LILY_CUDA_MOE_FUSED_NG): kernel tests (both group counts bitwise), e2e, decode 4K/32K off / NG 1 /
# NG 2 alternating; Nsight Compute of the fused kernel (speed of light, stall reasons, source
# counters as CSV under $OUT) and the durations of the two-launch pair for comparison.
. .carry/common.sh; synth_bg; safe_start 520
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-260
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch" $L/e2e.txt | cut -c1-330
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "0 2" "1 1" "1 2" "0 2" "1 1" "1 2"; do set -- $v
  LILY_CUDA_MOE_FUSED=$1 LILY_CUDA_MOE_FUSED_NG=$2 timeout 60 $BB --decode 4K,32K --out $L/f$1$2 2>&1 | grep -E "^decode " | sed "s/^/fused=$1 ng=$2 /"; done; el bench
S="--clock-control none --section SpeedOfLight --section WarpStateStats --section LaunchStats"
NB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 1 --warmup 0 --decode 256"
for ng in 1 2; do
LILY_CUDA_MOE_FUSED=1 LILY_CUDA_MOE_FUSED_NG=$ng timeout 120 ncu $S --section SourceCounters -k regex:moe_fused --launch-skip 60 --launch-count 1 --import-source yes -o /tmp/ncu_f$ng $NB > $L/ncu_f$ng.log 2>&1; el "ncu fused ng=$ng rc=$?"
timeout 60 ncu -i /tmp/ncu_f$ng.ncu-rep --page details > $L/ncu_f$ng.txt 2>&1
grep -E "Duration|Throughput|Registers|Stall|Issued|Block Size|Cluster" $L/ncu_f$ng.txt | head -30
timeout 60 ncu -i /tmp/ncu_f$ng.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_f$ng.csv 2>/dev/null; xz -9 $OUT/src_f$ng.csv
done
LILY_CUDA_MOE_FUSED=0 timeout 120 ncu $S -k regex:"moe_(gate|down)" --launch-skip 60 --launch-count 4 $NB > $L/ncu_pair.txt 2>&1; el "ncu pair rc=$?"
grep -E "moe_|Duration" $L/ncu_pair.txt | cut -c1-120 | head -16
safe_end
