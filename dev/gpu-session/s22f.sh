#!/usr/bin/env bash
# s22f.sh (device, ~2 min; NOT RUN: the twenty-second session's device time was spent; the next session's first check): main after the closing review (qgemm_gt.cu's three-warpgroup knob removed; its
# kernels' SASS unchanged): qgemm_gt's MoE passes, e2e and the fixtures.
. .carry/common.sh; safe_start 150
LILY_GPU_PF=moegt timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
e2e_fix
safe_end
