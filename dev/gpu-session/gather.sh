#!/usr/bin/env bash
# gather.sh (device, ~2.5 min): the MoE gate|up rows gathered into expert order so the GEMM takes
# tensor-map loads (LILY_CUDA_MOE_GATHER, default 1): prefill tests (MoE cases both ways), e2e,
# fixtures; lily bench 4K,32K on/off alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 200
pf_checks
wait $SP
for v in 1 0 1 0; do LILY_CUDA_MOE_GATHER=$v timeout 40 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K,32K --decode none --reps 2 --warmup 1 --out $L/g$v 2>&1 | grep -E "^prefill " | sed "s/^/gather=$v /"; done; el bench
timeout 30 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el pfprof; grep -v upload $L/pfprof.txt | head -8; grep gathered $L/pfprof.txt
safe_end
