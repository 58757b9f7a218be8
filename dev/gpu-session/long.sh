#!/usr/bin/env bash
# long.sh (device, ~4 min): decode attention packed (GQA) at 64 splits from LILY_CUDA_ATTN_LONG positions on
# (attn_plan; graphs per side of the threshold). Attention kernel tests, e2e (defaults, and with the
# threshold at 5 positions so the packed layout and the graph switch run in every decode test), fixtures;
# decode 4K..128K: automatic / never packed / always packed.
. .carry/common.sh; synth_bg; safe_start 560
LILY_GPU_KERNELS=attn timeout 60 $B/lily-gpu-test kernels $(date +%s) 2>&1 | grep -E "FAIL|passed"; el "attn kernels"
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
LILY_CUDA_ATTN_LONG=5 timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e5.txt 2>&1; el "e2e long from 5 rc=$?"; grep -E "FAIL|passed" $L/e2e5.txt | cut -c1-200
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_CUDA_ATTN_LONG=5 timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures long from 5 rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-200
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill none --reps 2 --warmup 1 --decode 4K,32K,48K,64K,128K"
run() { env "$@" timeout 150 $B/lily bench $A --out $L/b 2>&1 | grep -E "^decode " | sed "s/^/$* /"; }
run LILY_CUDA_GQA=-1
run LILY_CUDA_GQA=0
run LILY_CUDA_GQA=1
el bench
safe_end
