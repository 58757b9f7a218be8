#!/usr/bin/env bash
# try.sh (device, ~8 min; branch try = main + fa-v5 + gdn-presplit): the first GPU run of main's last
# commits and of both branches. Kernel tests, prefill tests (every D-256 attention case in modes 1-3, every
# chunked-GDN case plain and pre-split), e2e with pre-split on and off, HF fixtures, cli_prefill, memcheck
# and racecheck of the small prefill tests; then prefill A/B: LILY_CUDA_FA_WG 2/3 at 32K,128K and
# LILY_CUDA_GDN_PRESPLIT 0/1 at 4K,32K; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 570
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head
pf_checks; grep -E "\| attention|\| chunked" $L/prefill.txt | cut -c1-220 | head -12
LILY_CUDA_GDN_PRESPLIT=0 timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e0.txt 2>&1; el "e2e presplit=0 rc=$?"; grep -E "FAIL|passed" $L/e2e0.txt | cut -c1-260
pf_cli
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/racecheck.txt 2>&1; el "racecheck rc=$?"; tail -1 $L/racecheck.txt
wait $SP; el synth
for v in 2 3 2 3; do LILY_CUDA_FA_WG=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 32K,128K --out $L/v$v 2>&1 | grep -E "^prefill " | sed "s/^/FA_WG=$v /"; done; el bench
env_ab LILY_CUDA_GDN_PRESPLIT --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,32K
pf_prof 14
safe_end
