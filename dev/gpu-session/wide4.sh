#!/usr/bin/env bash
# wide4.sh (device, ~2.5 min): the wide-tile rule without the grouped down projection: e2e, lily
# bench prefill rule / no wide tile alternating, pfprof 4K; ncu source-level CSV of the wide tile
# (shared-memory epilogue) at in_proj's shape.
. .carry/common.sh; synth_bg; safe_start 400
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
wait $SP
for v in 1 0 1; do
  LILY_CUDA_QG_WIDE=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench_$v 2>&1 | grep -E "^prefill " | sed "s/^/wide=$v /"
done; el bench
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -12
timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy -k regex:qgemm_wg --launch-count 1 --import-source yes -o /tmp/ncu_w $B/lily-gpu-test qgone 4096 12352 2048 128 5 > $L/ncu_w.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_w.ncu-rep --page details > $L/ncu_w_details.txt 2>&1; grep -E "Duration|Throughput|Occupancy|Registers|Issue|Ipc|Waves" $L/ncu_w_details.txt | head -16
timeout 60 ncu -i /tmp/ncu_w.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_w.csv 2>/dev/null; xz -9 $OUT/src_w.csv
safe_end
