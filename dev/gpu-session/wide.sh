#!/usr/bin/env bash
# wide.sh (device, ~5 min): the wide bf16-weight tile (qgemm_wg.cu, BN = 256, LILY_CUDA_QG_WIDE=1),
# first run: prefill tests (every 128-row qgemm case and the MoE cases through it), e2e with it on,
# memcheck of one wide GEMM, qgone against the 128-column tile (WG 3 vs 5, 3 or 4 stages), lily bench
# prefill off/on alternating, pfprof 4K with it on.
. .carry/common.sh; synth_bg; safe_start 560
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-230 | head -30; grep -E "wide tile" $L/prefill.txt | head -3 | cut -c1-200
LILY_CUDA_QG_WIDE=1 timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e (wide) rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
for s in "300 600 256" "129 1030 512"; do timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test qgone $s 128 5 > $L/memcheck.txt 2>&1; el "memcheck $s rc=$?"; tail -1 $L/memcheck.txt; done
for s in "4096 8192 2048" "4096 2048 4096" "4096 12352 2048" "4096 2048 512" "1024 1024 2048"; do for w in 3 5; do timeout 20 $B/lily-gpu-test qgone $s 128 $w | grep qgone; done; LILY_QG_WIDE_ST=4 timeout 20 $B/lily-gpu-test qgone $s 128 5 | grep qgone | sed 's/^/st4 /'; done; el qgone
wait $SP
for v in 0 1 0 1; do LILY_CUDA_QG_WIDE=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench$v 2>&1 | grep -E "^prefill " | sed "s/^/wide=$v /"; done; el bench
LILY_QG_WIDE_ST=4 LILY_CUDA_QG_WIDE=1 timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench4 2>&1 | grep -E "^prefill " | sed "s/^/wide st4 /"; el bench4
LILY_CUDA_QG_WIDE=1 timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -16
safe_end
