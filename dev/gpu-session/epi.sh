#!/usr/bin/env bash
# epi.sh (device, ~4 min): the shared-memory epilogue of qgemm_wg.cu's bf16-weight path and the wide
# tile's rule with a wave floor: prefill tests, e2e, fixtures, memcheck; qgone with the register
# epilogue (LILY_QG_EPI_REGS=1, timing only) and without, 128-column and wide tiles; lily bench
# prefill default / register epilogue / no wide tile, alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 540
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-230 | head -20
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fix.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fix.txt | cut -c1-200 | tail -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck prefill small rc=$?"; grep FAIL $L/memcheck.txt | head -3; tail -1 $L/memcheck.txt
for w in 3 5; do timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test qgone 129 1030 512 128 $w > $L/memcheck$w.txt 2>&1; el "memcheck qgone w$w rc=$?"; tail -1 $L/memcheck$w.txt; done
for s in "4096 8192 2048" "4096 2048 4096" "4096 12352 2048" "4096 2048 512" "1024 1024 2048"; do for w in 3 5; do for e in 0 1; do LILY_QG_EPI_REGS=$e timeout 20 $B/lily-gpu-test qgone $s 128 $w | grep qgone | sed "s/^/epi_regs=$e /"; done; done; done; el qgone
wait $SP
for i in 1 2; do
  timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench_d$i 2>&1 | grep -E "^prefill " | sed "s/^/default /"
  LILY_QG_EPI_REGS=1 timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench_r$i 2>&1 | grep -E "^prefill " | sed "s/^/epi_regs /"
  LILY_CUDA_QG_WIDE=0 timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench_n$i 2>&1 | grep -E "^prefill " | sed "s/^/wide=0 /"
done; el bench
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -18
safe_end
