#!/usr/bin/env bash
# s29e.sh (device, ~2 min): the per-kernel table of one 4K step (lily-gpu-test prof) with LILY_CUDA_GDN_OUT
# 0 and 1: where the fused gdn_step + out_proj's time goes.
. .carry/common.sh; safe_start 200
synth_bg; wait $SP; el synth
for v in 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof_$v.txt 2>&1; el "prof GDN_OUT=$v rc=$?"; grep "^|" $L/prof_$v.txt
done
safe_end
