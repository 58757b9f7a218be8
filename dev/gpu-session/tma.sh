#!/usr/bin/env bash
# tma.sh (device, ~4 min): the wide tile's tensor-map loads (LILY_CUDA_QG_TMA, default 1): prefill
# tests (every 128-row case through the wide tile with and without TMA), e2e, fixtures, memcheck of
# two TMA GEMMs; qgone wide TMA / cp.async; lily bench prefill TMA on/off alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 540
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-230 | head -20; grep "wide tile" $L/prefill.txt | head -4 | cut -c1-200
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fix.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fix.txt | cut -c1-200 | tail -5
for s in "300 600 256" "129 1030 512"; do timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test qgone $s 128 5 > $L/memcheck.txt 2>&1; el "memcheck $s rc=$?"; tail -1 $L/memcheck.txt; done
for s in "4096 8192 2048" "4096 2048 4096" "4096 12352 2048" "4096 2048 512" "2048 1024 2048"; do for w in 3 5 6; do timeout 20 $B/lily-gpu-test qgone $s 128 $w | grep qgone; done; done; el qgone
wait $SP
for v in 1 0 1 0; do
  LILY_CUDA_QG_TMA=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench_$v 2>&1 | grep -E "^prefill " | sed "s/^/tma=$v /"
done; el bench
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -14
safe_end
