#!/usr/bin/env bash
# s11j.sh (device, ~1.5 min; eleventh session): the MoE block test now counts the shared expert's runs
# in its side-stream pass (exactly one: the double run of call 6 would fail it). Prefill tests, e2e.
. .carry/common.sh
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "GEMM blocks rastered: equal" $L/prefill.txt
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | head -3
