#!/usr/bin/env bash
# tma128.sh (device, ~2.5 min; branch tma128): the 128-column bf16-weight tile with tensor-map loads
# (LILY_CUDA_QG_TMA128=1), first run: prefill tests (every 128-row qgemm case through it, the MoE
# cases with it), e2e with it on, memcheck of one TMA-128 GEMM; qgone 3 vs 7 on the down projection's
# and small shapes; lily bench prefill off/on alternating; pfprof 4K with it on.
. .carry/common.sh; synth_bg; safe_start 400
timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
LILY_CUDA_QG_TMA128=1 timeout 40 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test qgone 300 600 256 128 7 > $L/mc.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/mc.txt
for s in "4096 2048 512" "1024 1024 2048" "512 2048 4096" "2048 1024 2048"; do for w in 3 7; do timeout 20 $B/lily-gpu-test qgone $s 128 $w | grep qgone; done; done; el qgone
wait $SP
for v in 0 1 0 1; do LILY_CUDA_QG_TMA128=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/t$v 2>&1 | grep -E "^prefill " | sed "s/^/tma128=$v /"; done; el bench
LILY_CUDA_QG_TMA128=1 timeout 30 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el pfprof; grep -v upload $L/pfprof.txt | head -10
safe_end
