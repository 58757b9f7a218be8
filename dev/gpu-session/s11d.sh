#!/usr/bin/env bash
# s11d.sh (device, ~4 min; eleventh session): the MoE tails on 32- and 16-row tiles (LILY_CUDA_MOE_TAILS
# 2 / 3: the mma.sync kernel, a tail taking as many tiles as it fills) against 64-row wgmma tiles (1).
# Prefill tests (every MoE case in every tail mode), pfprof 4K per mode, bench A/B.
. .carry/common.sh; synth_bg; safe_start 400
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -E "^\(the same MoE" $L/prefill.txt
wait $SP; el synth
for v in 1 2 3; do LILY_CUDA_MOE_TAILS=$v timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; echo "== pfprof tails $v"; grep -E "grouped gemm|plain" $L/pfprof$v.txt; done; el pfprof
for v in 1 2 3 1 2 3; do LILY_CUDA_MOE_TAILS=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,4K,32K --decode none --out $L/t$v 2>&1 | grep -E "^prefill " | sed "s/^/tails=$v /"; done; el "tails A/B"
safe_end
