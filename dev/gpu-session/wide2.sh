#!/usr/bin/env bash
# wide2.sh (device, ~4 min): the wide tile by rule (grouped gate|up, K >= 4096; LILY_CUDA_QG_WIDE=1,
# the new default): e2e, HF fixtures, lily bench prefill rule/off alternating, pfprof 4K; ncu
# source-level CSVs of one dense GEMM on the 128-column and the wide tile (what bounds a stage).
. .carry/common.sh; synth_bg; safe_start 500
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fix.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fix.txt | cut -c1-200 | tail -5
wait $SP
for v in 1 0 1 0; do LILY_CUDA_QG_WIDE=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench$v 2>&1 | grep -E "^prefill " | sed "s/^/wide=$v /"; done; el bench
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -18
for w in 3 5; do
  timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy -k regex:qgemm_wg --launch-count 1 --import-source yes -o /tmp/ncu_w$w $B/lily-gpu-test qgone 4096 8192 2048 128 $w > $L/ncu_w$w.log 2>&1; el "ncu w$w rc=$?"
  timeout 60 ncu -i /tmp/ncu_w$w.ncu-rep --page details > $L/ncu_w${w}_details.txt 2>&1; grep -E "Duration|Throughput|Occupancy|Registers|Issue|Ipc|Waves" $L/ncu_w${w}_details.txt | head -16
  timeout 60 ncu -i /tmp/ncu_w$w.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_w$w.csv 2>/dev/null; xz -9 $OUT/src_w$w.csv
done
safe_end
