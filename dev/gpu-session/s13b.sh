#!/usr/bin/env bash
# s13b.sh (device, ~5 min; thirteenth session, call 3): the tensor-core decode attention after the
# racecheck mend (the appended row is copied again only by the split that holds it): racecheck of its
# kernel tests; all kernel tests, e2e, fixtures; then its split count by context (LILY_CUDA_ATTN_SPLIT).
. .carry/common.sh; synth_bg; safe_start 560
LILY_GPU_KERNELS=attn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/san_racecheck.txt 2>&1; el "racecheck attn rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/san_racecheck.txt | head -4
ab_checks
wait $SP; el synth
for v in 64 32 66 128 64; do
  LILY_CUDA_ATTN_SPLIT=$v timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K,128K --reps 2 --warmup 1 --out $L/sp_$v 2>&1 | grep -E "^decode " | sed "s/^/split=$v /"
done; el bench
safe_end
