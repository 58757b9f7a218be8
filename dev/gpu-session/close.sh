#!/usr/bin/env bash
# close.sh (device, ~4 min): a session's closing check of main: kernel tests, prefill tests, e2e, HF
# fixtures, cli_prefill.py, the demo model's fidelity on CUDA, memcheck of the small prefill tests;
# then pfprof 4K and the prefill sweep 256 .. 128K (tok/s, % of the matrix roofline, peak memory).
# CLOSE_AB="ENV=VALUE ...": first a lily bench prefill 2K,4K,32K default / with those settings / default.
# CLOSE_DECODE=1: racecheck of the MoE kernel tests, and the decode sweep 256, 4K, 32K, 128K at the end.
. .carry/common.sh; synth_bg; safe_start 480
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head; grep -E "chunked.*T=(2048|1000|200) " $L/prefill.txt | cut -c1-200
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220; grep -E "mlx-4bit bf16-act bf16-weights all" $L/fixtures.txt | cut -c1-200
pf_cli
LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -1 $L/demo.txt
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP
if [ -n "${CLOSE_AB:-}" ]; then for v in 0 1 0; do
  if [ $v = 1 ]; then E="$CLOSE_AB"; else E=""; fi
  env $E timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^prefill " | sed "s/^/[${E:-default}] /"
done; el "a/b"; fi
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -26
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
if [ -n "${CLOSE_DECODE:-}" ]; then
  LILY_GPU_KERNELS=moe timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 31 > $L/racecheck.txt 2>&1; el "racecheck moe rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck.txt | head -3
  timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dsweep 2>&1 | grep -E "^decode |^#|tok/s" | head -8; el "decode sweep"
fi
safe_end
