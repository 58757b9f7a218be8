#!/usr/bin/env bash
# bulk.sh (device, ~4 min; branch gv2-bulk): gemv2's bulk-staged first tiles (LILY_CUDA_GV2_BULK).
# Kernel tests (each GEMV case with bulk staging must equal the default bitwise), e2e + HF fixtures
# with it on, memcheck of the kernels, decode 4K/32K with it off/on alternating, the chain rows.
. .carry/common.sh; synth_bg
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|DIFFERS|passed" $L/kernels.txt | cut -c1-220
grep -c "bulk-staged: bitwise equal" $L/kernels.txt
export LILY_CUDA_GV2_BULK=1
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e (bulk) rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-220
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_GPU_HF_BF16=tests/gpu/hf_bf16 timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures (bulk) rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck kernels rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt
unset LILY_CUDA_GV2_BULK
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in 0 1 0 1; do
  LILY_CUDA_GV2_BULK=$v timeout 60 $BB --decode 4K,32K --out $L/bulk$v 2>&1 | grep -E "^decode " | sed "s/^/gv2_bulk=$v /"
done
el bench
timeout 200 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -E "^\|" $L/chain.txt
