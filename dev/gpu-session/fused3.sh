#!/usr/bin/env bash
# fused3.sh (device, ~4 min): the one-launch MoE with clusters of 16 blocks and the shared expert's
# rows spread over them (no shared-expert cluster): kernel tests (clusters of 8 and 16, both warp
# group counts bitwise), e2e, memcheck and racecheck of the MoE kernel tests, decode 4K/32K: off /
# clusters of 8 / 16 alternating; ncu duration of the fused kernel at both cluster sizes.
. .carry/common.sh; synth_bg; safe_start 520
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-260
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch" $L/e2e.txt | cut -c1-330
LILY_GPU_KERNELS=moe timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck moe rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt | head -5
LILY_GPU_KERNELS=moe timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 31 > $L/racecheck.txt 2>&1; el "racecheck moe rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY|hazard" $L/racecheck.txt | head -5
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "0 0" "1 8" "1 0" "0 0" "1 8" "1 0"; do set -- $v
  LILY_CUDA_MOE_FUSED=$1 LILY_CUDA_MOE_FUSED_CL=$2 timeout 60 $BB --decode 4K,32K --out $L/f$1$2 2>&1 | grep -E "^decode " | sed "s/^/fused=$1 cl=$2 /"; done; el bench
NB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 1 --warmup 0 --decode 256"
for cl in 8 16; do
LILY_CUDA_MOE_FUSED_CL=$cl timeout 100 ncu --clock-control none --section SpeedOfLight --section LaunchStats -k regex:moe_fused --launch-skip 60 --launch-count 2 $NB > $L/ncu_cl$cl.txt 2>&1; el "ncu cl=$cl rc=$?"
grep -E "Duration|Cluster Size|Grid Size|DRAM Throughput" $L/ncu_cl$cl.txt | head -8
done
safe_end
