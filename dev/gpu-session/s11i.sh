#!/usr/bin/env bash
# s11i.sh (device, ~1 min; eleventh session's last call): the final main's fixtures, cli_prefill, demo
# fidelity and kernels (the checks call 6 ran before the shared-expert join fix and the review mend).
. .carry/common.sh
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | head -3
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 120 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | head -3
pf_cli
LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -1 $L/demo.txt
