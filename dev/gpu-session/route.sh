#!/usr/bin/env bash
# route.sh (device, ~1.5 min): the prefill MoE's routing kernel on the decode path's router_topk
# (one copy of the selection): prefill tests (routing on the GPU against the host's), e2e, HF
# fixtures, cli_prefill, demo fidelity on CUDA, prefill 4K.
. .carry/common.sh; synth_bg; safe_start 200
pf_checks
pf_cli
LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -1 $L/demo.txt
wait $SP
timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K --decode none --reps 3 --warmup 1 --out $L/pf 2>&1 | grep -E "^prefill "; el bench
safe_end
