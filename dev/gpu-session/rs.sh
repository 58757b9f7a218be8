#!/usr/bin/env bash
# rs.sh (device, ~3 min): the swapped-operand bf16-weight GEMM (qgemm_rs.cu, LILY_CUDA_QG_RS=1),
# first run: prefill tests (every qgemm case through it, the MoE cases on it), e2e with it on,
# memcheck, qgone against the bf16-weight wgmma kernel (WG 3 vs 4), lily bench prefill off/on/off/on,
# pfprof 4K with it on.
. .carry/common.sh; synth_bg; safe_start 500
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-230 | head -30; grep -E "swapped operands" $L/prefill.txt | head -4 | cut -c1-200
LILY_CUDA_QG_RS=1 timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e (rs) rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
LILY_CUDA_QG_RS=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; grep -E "FAIL" $L/memcheck.txt | head -3; tail -1 $L/memcheck.txt
for s in "4096 8192 2048" "4096 2048 4096" "256 8192 2048" "1024 1024 2048"; do for t in 64 128; do for w in 3 4; do timeout 20 $B/lily-gpu-test qgone $s $t $w | grep qgone; done; done; done; el qgone
wait $SP
for v in 0 1 0 1; do LILY_CUDA_QG_RS=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench$v 2>&1 | grep -E "^prefill " | sed "s/^/rs=$v /"; done; el bench
LILY_CUDA_QG_RS=1 timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -14
safe_end
