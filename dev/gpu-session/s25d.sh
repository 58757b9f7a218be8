#!/usr/bin/env bash
# s25d.sh (device, ~7 min): main 400b967's prefill kernel tests in full and memcheck of their small set;
# then 4K knobs against the default (LILY_CUDA_MOE_TAILS 0 / 1 / 3, LILY_CUDA_QG_RW 51), one run each,
# alternating with the default.
. .carry/common.sh; safe_start 560
synth_bg
timeout 380 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP
for e in "X=0" "LILY_CUDA_MOE_TAILS=0" "X=0" "LILY_CUDA_MOE_TAILS=1" "X=0" "LILY_CUDA_MOE_TAILS=3" "X=0" "LILY_CUDA_QG_RW=51" "X=0"; do
  env $e timeout 40 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K --decode none --reps 1 --warmup 1 --out $L/k 2>&1 | grep -E "^prefill " | sed "s/^/$e /"
done; el knobs
safe_end
