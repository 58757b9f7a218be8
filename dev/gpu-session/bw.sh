#!/usr/bin/env bash
# bw.sh (device, ~3 min): the wgmma GEMM on bf16-rounded weights (LILY_CUDA_QG_BF16W): prefill tests
# (every wgmma qgemm case again against bf16-rounded reference weights), e2e (vs the CPU backend,
# 64-row tiles, chunks of 7), the HF fixtures with it on, memcheck of the small prefill tests, single
# GEMM timings (WG 1 exact, 3 bf16 weights) and lily bench prefill off/on alternating.
. .carry/common.sh; synth_bg; safe_start 500
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head; grep -c "bf16 weights" $L/prefill.txt; grep "bf16 weights" $L/prefill.txt | head -3 | cut -c1-200
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|bf16-rounded|passed" $L/e2e.txt | cut -c1-300
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_CUDA_QG_BF16W=1 timeout 100 env LILY_GPU_HF_BF16=tests/gpu/hf_bf16 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures (bf16w) rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-200
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -2 $L/memcheck.txt
for s in "4096 8192 2048" "4096 2048 4096" "256 8192 2048" "1024 1024 2048"; do
  for t in 64 128; do for w in 1 3; do $B/lily-gpu-test qgone $s $t $w | grep qgone; done; done
done; el qgone
wait $SP
for bw in 0 1 0 1; do
  LILY_CUDA_QG_BF16W=$bw timeout 90 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bw$bw 2>&1 | grep -E "^prefill " | sed "s/^/bf16w=$bw /"
done; el "prefill bench"
safe_end
