#!/usr/bin/env bash
# bwdef.sh (device, ~4 min): (1) the bf16-weight prefill GEMM as the default: e2e, prefill tests,
# HF fixtures (exact-weight rows against ref_logits.f32, bf16-weight rows against
# tests/gpu/hf_bf16w), tests/gpu/cli_prefill.py, the demo model's fidelity test on CUDA, memcheck;
# (2) Nsight Compute source-level counters (SASS with CUDA lines: executed instructions and stall
# samples) of the two chunked-GDN kernels at T = 4096, as CSV under $OUT for reading offline.
. .carry/common.sh; synth_bg; safe_start 480
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|bf16-rounded|64-row tiles: wgmma|passed" $L/e2e.txt | cut -c1-260
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed|seed" $L/prefill.txt | cut -c1-200 | head
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220; grep -E "mlx-4bit bf16-act" $L/fixtures.txt | cut -c1-200; grep -B3 "mlx-4bit bf16-act bf16-weights all" $L/fixtures.txt | cut -c1-200
LILY_BIN=$B/lily timeout 150 python3 tests/gpu/cli_prefill.py > $L/cli_prefill.txt 2>&1; el "cli_prefill rc=$?"; grep -E "FAIL|mlx|failed" $L/cli_prefill.txt | cut -c1-220
if python3 -c 'import pytest' 2>/dev/null; then LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -3 $L/demo.txt; fi
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -2 $L/memcheck.txt
wait $SP
for k in prep scan; do
  timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:gdn_chunk_$k --launch-count 1 --import-source yes -o /tmp/ncu_$k $B/lily-gpu-test pfprof /tmp/big 4K > $L/ncu_$k.log 2>&1; el "ncu $k rc=$?"
  timeout 60 ncu -i /tmp/ncu_$k.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$k.csv 2> $L/src_$k.err || timeout 60 ncu -i /tmp/ncu_$k.ncu-rep --page source --csv > $OUT/src_$k.csv 2>> $L/src_$k.err
  el "source page $k rc=$?"; wc -c $OUT/src_$k.csv; head -c 600 $OUT/src_$k.csv; cat $L/src_$k.err | head -5
  xz -k -9 $OUT/src_$k.csv 2>/dev/null && rm -f $OUT/src_$k.csv
done
safe_end
