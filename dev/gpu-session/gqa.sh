#!/usr/bin/env bash
# gqa.sh (device, ~4 min): decode attention with GQA packing (one K/V read for the 8 query heads of a KV
# head) at more splits (64 / 128 / 256 blocks per KV head: 128-512 blocks) against the default (no packing,
# 32 splits, each K/V row read by 8 blocks). e2e with packing at 128 splits; decode 4K / 32K / 128K.
. .carry/common.sh; synth_bg; safe_start 560
LILY_CUDA_GQA=1 LILY_CUDA_ATTN_SPLIT=128 timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e gqa rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill none --reps 2 --warmup 1 --decode 4K,32K,128K"
run() { env "$@" timeout 100 $B/lily bench $A --out $L/b 2>&1 | grep -E "^decode " | sed "s/^/$* /"; }
run LILY_CUDA_GQA=0
run LILY_CUDA_GQA=1 LILY_CUDA_ATTN_SPLIT=64
run LILY_CUDA_GQA=1 LILY_CUDA_ATTN_SPLIT=128
run LILY_CUDA_GQA=1 LILY_CUDA_ATTN_SPLIT=256
run LILY_CUDA_GQA=0
el bench
safe_end
