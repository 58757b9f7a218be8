#!/usr/bin/env bash
# s29g.sh (device, ~2 min): the sums' flags read by one thread a block (the flag word was one hot L2 line):
# kernel tests (with the fold's timing lines), e2e, the per-kernel table with LILY_CUDA_GDN_OUT 0 / 1, and
# decode at 4K alternating.
. .carry/common.sh; safe_start 260
synth_bg
timeout 200 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"
grep -E "^FAIL|passed|timing rows=(1281|12352|20011|1001) " $L/kernels.txt | grep -v "gemv2 " | cut -c1-200
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
wait $SP; el synth
for v in 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof_$v.txt 2>&1; el "prof GDN_OUT=$v rc=$?"; grep -E "gdn|moe|total" $L/prof_$v.txt
done
for v in 0 1 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/GDN_OUT=$v /"
done; el bench
safe_end
