#!/usr/bin/env bash
# s25e.sh (device, ~6 min): main's build after the MoE cases for qgemm_rw.cu were kept to its passes (s25d.sh's
# full prefill suite ran past 380 s: the K = 1024 case's CPU reference in every pass): e2e, then the whole
# prefill suite.
. .carry/common.sh; safe_start 400
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
timeout 330 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
safe_end
