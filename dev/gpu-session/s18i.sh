#!/usr/bin/env bash
# s18i.sh (device, ~2 min; written in the eighteenth session, NOT RUN: no device time was left; a build
# of branch qgemm-tn, where LILY_CUDA_QG_TN and LILY_GPU_PF=tn exist): qgemm_tn's grid shape in the engine. Call 8 had
# the gate|up of 256-token prompts slower end to end with it (one block an expert) although faster
# alone. Its tests with one column tile a block (LILY_CUDA_QG_TN_CT=1), then prefill 256/512 with
# LILY_CUDA_QG_TN=0, =1, =1 and CT=1.
. .carry/common.sh; synth_bg; safe_start 150
LILY_CUDA_QG_TN_CT=1 LILY_GPU_PF=tn timeout 60 $B/lily-gpu-test prefill $(date +%s) > $L/tn.txt 2>&1; el "tn tests (ct 1) rc=$?"; grep -E "FAIL|passed" $L/tn.txt | cut -c1-200
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill 256,512 --decode none --reps 3 --warmup 1"
for i in 1 2; do
  LILY_CUDA_QG_TN=0 timeout 30 $B/lily bench $A --out $L/a$i 2>&1 | grep -E "^prefill " | sed "s/^/tn0 /"
  LILY_CUDA_QG_TN=1 timeout 30 $B/lily bench $A --out $L/b$i 2>&1 | grep -E "^prefill " | sed "s/^/tn1 all /"
  LILY_CUDA_QG_TN=1 LILY_CUDA_QG_TN_CT=1 timeout 30 $B/lily bench $A --out $L/c$i 2>&1 | grep -E "^prefill " | sed "s/^/tn1 ct1 /"
done; el bench
safe_end
