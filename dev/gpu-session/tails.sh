#!/usr/bin/env bash
# tails.sh (device, ~4 min): the MoE groups' tails on 64-row tiles (moe_pf_tails; LILY_CUDA_MOE_TAILS) and
# narrow dense GEMMs on 64-row tiles (qgemm_fill_tile; LILY_CUDA_QG_FILL). Prefill kernel tests, e2e, HF
# fixtures, cli_prefill; prefill 4K/8K/32K alternating tails 0 / 1; pfprof 4K with both on.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks
grep -E "tails on|tail" $L/prefill.txt | cut -c1-200 | head -8
LILY_BIN=$B/lily timeout 150 python3 tests/gpu/cli_prefill.py > $L/cli_prefill.txt 2>&1; el "cli_prefill rc=$?"; grep -E "FAIL|failed" $L/cli_prefill.txt | cut -c1-200
wait $SP
A="--model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1 --prefill 4K,8K,32K"
for v in 0 1 0 1; do LILY_CUDA_MOE_TAILS=$v timeout 90 $B/lily bench $A --out $L/tails$v 2>&1 | grep -E "^prefill " | sed "s/^/tails=$v /"; done; el bench
timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -12
safe_end
