#!/usr/bin/env bash
# (Ran a build of branch qgemm-tn: LILY_CUDA_QG_TN and LILY_GPU_PF=tn exist there, not on main.)
# s18e.sh (device, ~4 min; eighteenth session, call 5): the L2 prefetch-size hint (.L2::256B) on
# qgemm.cu's cp.async copies and qgemm_tn's weight loads. The dev harness at T = 256/512/1024 (the
# engine's qgemm.cu, now hinted, against call 4's numbers; qgemm_tn hinted); then prefill 256..4K of
# the build before the hint (lily_old, LILY_CUDA_QG_TN=0) against this one with LILY_CUDA_QG_TN 0 and
# 1, alternating; e2e and fixtures.
. .carry/common.sh; synth_bg; ab_old; safe_start 500
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
for T in 256 512 1024; do LILY_SM_TN=1 timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; grep -vE "^variant (GLU NT1|DN NT1|GLU NT4)" $L/qgsm_$T.txt; done
e2e_fix
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K --decode none --reps 3 --warmup 1"
for i in 1 2; do
  LILY_CUDA_QG_TN=0 timeout 100 /tmp/lily_old bench $A --out $L/o$i 2>&1 | grep -E "^prefill " | sed "s/^/old tn0 /"
  LILY_CUDA_QG_TN=0 timeout 100 $B/lily bench $A --out $L/n$i 2>&1 | grep -E "^prefill " | sed "s/^/new tn0 /"
  LILY_CUDA_QG_TN=1 timeout 100 $B/lily bench $A --out $L/t$i 2>&1 | grep -E "^prefill " | sed "s/^/new tn1 /"
done; el bench
safe_end
