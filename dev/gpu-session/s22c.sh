#!/usr/bin/env bash
# s22c.sh (device, ~7 min): main's final code (ec57812; no engine change this session) through the GPU
# tests the twenty-first session's last calls did not cover together: the decode kernel tests, the whole
# prefill suite (it last ran on a build with a since-reverted loop), e2e and the HF fixtures.
. .carry/common.sh; safe_start 520
timeout 120 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-220 | head -5
pf_checks
safe_end
