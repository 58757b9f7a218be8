#!/usr/bin/env bash
# (Ran a build of branch qgemm-tn: LILY_CUDA_QG_TN and LILY_GPU_PF=tn exist there, not on main.)
# s18g.sh (device, ~2 min; eighteenth session, call 7): qgemm_tn with a block walking several column
# tiles (X staged once for them): the dev harness's variants at T = 256 and 512, and its kernel tests.
. .carry/common.sh; safe_start 280
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
for T in 256 512; do LILY_SM_TN=1 timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; cat $L/qgsm_$T.txt; done
LILY_GPU_PF=tn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/tn.txt 2>&1; el "tn tests rc=$?"; grep -E "FAIL|passed" $L/tn.txt | cut -c1-200
safe_end
