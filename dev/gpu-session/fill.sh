#!/usr/bin/env bash
# fill.sh (device, ~4 min): dense prefill GEMMs on 64-row tiles where 128-row ones would fill under half
# the SMs (qgemm_fill_tile; LILY_CUDA_QG_FILL=0 is the old rule). Prefill kernel tests, e2e, HF fixtures,
# cli_prefill; prefill 256..32K alternating FILL 0 / 1; pfprof 4K with it.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks
LILY_BIN=$B/lily timeout 150 python3 tests/gpu/cli_prefill.py > $L/cli_prefill.txt 2>&1; el "cli_prefill rc=$?"; grep -E "FAIL|mlx|failed" $L/cli_prefill.txt | cut -c1-220
wait $SP
A="--model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1 --prefill 256,512,1K,2K,4K,32K"
for v in 0 1 0 1; do LILY_CUDA_QG_FILL=$v timeout 90 $B/lily bench $A --out $L/fill$v 2>&1 | grep -E "^prefill " | sed "s/^/fill=$v /"; done; el bench
timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -30
safe_end
