#!/usr/bin/env bash
# (Ran a build of branch qgemm-tn: LILY_CUDA_QG_TN and LILY_GPU_PF=tn exist there, not on main.)
# s18d.sh (device, ~4 min; eighteenth session, call 4): qgemm_tn's first run. The dev harness (CPU
# check of qgemm_tn's outputs, timing against qgemm.cu and the prototype, variants) at T = 256, 512,
# 1024; its kernel tests (LILY_GPU_PF=tn); e2e and fixtures with it on (the engine's default); then
# `lily bench` prefill 256..2K with LILY_CUDA_QG_TN 0 / 1 alternating.
. .carry/common.sh; synth_bg; safe_start 500
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
for T in 256 512 1024; do LILY_SM_TN=1 timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; cat $L/qgsm_$T.txt; done
LILY_GPU_PF=tn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/tn.txt 2>&1; el "tn tests rc=$?"; grep -E "FAIL|passed|qgemm_tn" $L/tn.txt | cut -c1-260
e2e_fix
wait $SP
env_ab LILY_CUDA_QG_TN --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K --decode none --reps 3 --warmup 1
safe_end
