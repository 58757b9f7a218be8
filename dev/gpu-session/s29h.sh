#!/usr/bin/env bash
# s29h.sh (device, ~2 min): gdn_out with one fold in the router (gdn_step writes the residual with the last
# MoE folded in): kernel tests, e2e, fixtures, the per-kernel table with LILY_CUDA_GDN_OUT 0 / 1, decode at
# 4K alternating (three pairs).
. .carry/common.sh; safe_start 280
synth_bg
timeout 200 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"
grep -E "^FAIL|passed|timing rows=(1281|12352) " $L/kernels.txt | grep -v "gemv2 " | cut -c1-200
e2e_fix
wait $SP; el synth
for v in 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof_$v.txt 2>&1; el "prof GDN_OUT=$v rc=$?"; grep -E "gdn|moe|total" $L/prof_$v.txt
done
for v in 0 1 0 1 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/GDN_OUT=$v /"
done; el bench
safe_end
