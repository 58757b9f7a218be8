#!/usr/bin/env bash
# s13e.sh (device, ~4 min; thirteenth session, call 6): the lm_head streamed through a ring of bulk
# copies (gemv_stream.cu, LILY_CUDA_LMHEAD): the GEMV kernel tests (its two tile sizes against the CPU,
# with timings) under memcheck and racecheck; e2e; fixtures; decode A/B of the switch (0, 1, 2).
. .carry/common.sh; synth_bg; safe_start 560
LILY_GPU_KERNELS=gemv timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kgemv.txt 2>&1; el "kernels gemv rc=$?"; grep -E "lm_head|248320|FAIL|passed" $L/kgemv.txt | cut -c1-220
for tool in memcheck racecheck; do
  LILY_GPU_KERNELS=gemv timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/san_$tool.txt 2>&1; el "$tool gemv rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/san_$tool.txt | head -4
done
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP; el synth
for v in 0 1 2 0 1 2; do
  LILY_CUDA_LMHEAD=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/LMHEAD=$v /"
done; el bench
safe_end
