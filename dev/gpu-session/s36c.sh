#!/usr/bin/env bash
# s36c.sh (device, ~3 min): where gdn_front_kernel's 23 us go. A build with a dev knob (LILY_CUDA_DEV_GF, not
# landed; wrong logits): 1 no tile math, 2 no step after the head barrier, 4 no weight copies, 8 no head
# barrier; ncu medians of its 90 launches in the real 4K step per knob value; then the first 9 gemv2 launches
# of the step with the front off (0, 3, 6: GDN in_proj) one by one.
. .carry/common.sh; safe_start 300
synth_bg; wait $SP; el synth
ncu_envs gdn_front_kernel - LILY_CUDA_DEV_GF=1 LILY_CUDA_DEV_GF=2 LILY_CUDA_DEV_GF=4 LILY_CUDA_DEV_GF=5 LILY_CUDA_DEV_GF=3 LILY_CUDA_DEV_GF=7 LILY_CUDA_DEV_GF=15 LILY_CUDA_DEV_GF=10
LILY_CUDA_GDN_FRONT=0 timeout 100 ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum -k regex:gemv2 --launch-count 9 \
    --csv --print-units base $B/lily-gpu-test prof /tmp/big > $L/ncu9.csv 2>&1; el "ncu gemv2 x9 rc=$?"
grep -E "gemv2" $L/ncu9.csv | awk -F'","' '{print $(NF)}' | tr '\n' ' '; echo
safe_end
