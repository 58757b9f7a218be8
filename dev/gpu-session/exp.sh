#!/usr/bin/env bash
# exp.sh (device, ~3 min): switch-only experiments on main with the wgmma flash attention. The wide tile for
# every GEMM (LILY_CUDA_QG_WIDE=2: the grouped MoE down projection too, which lost with the old per-piece
# epilogue) against the default (1), at 4K and 32K; prefill chunks of 8192 against 4096 at 32K; the
# per-phase profile at 64K.
. .carry/common.sh; synth_bg; safe_start 400; wait $SP
A="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none"
for v in 1 2 1 2; do LILY_CUDA_QG_WIDE=$v timeout 100 $B/lily bench $A --prefill 4K,32K --out $L/w$v 2>&1 | grep -E "^prefill " | sed "s/^/wide=$v /"; done; el wide
for v in 4096 8192 4096 8192; do LILY_CUDA_CHUNK=$v timeout 100 $B/lily bench $A --prefill 32K --out $L/c$v 2>&1 | grep -E "^prefill " | sed "s/^/chunk=$v /"; done; el chunk
timeout 120 $B/lily-gpu-test pfprof /tmp/big 64K > $L/pfprof64.txt 2>&1; el "pfprof64 rc=$?"; grep -E "\|" $L/pfprof64.txt | head -26
safe_end
