#!/usr/bin/env bash
# s33k.sh (device, ~3 min): the GDN prefill tests (they take gdn_step, whose roundings 8d496b0 spelled out, as
# their token-by-token reference) and the CLI prefill fixtures on the final build.
. .carry/common.sh; safe_start 190
LILY_GPU_PF=gdn timeout 100 $B/lily-gpu-test prefill $(date +%s) > $L/gdn.txt 2>&1; el "gdn prefill tests rc=$?"
grep -E "FAIL|passed" $L/gdn.txt | cut -c1-240 | head -8
LILY_BIN=$B/lily timeout 75 python3 tests/gpu/cli_prefill.py > $L/cli_prefill.txt 2>&1; el "cli_prefill rc=$?"
grep -E "FAIL|failed|passed|PASS" $L/cli_prefill.txt | cut -c1-200 | tail -4
safe_end
