#!/usr/bin/env bash
# pro.sh (device, ~7 min): the GEMV register prologue (LILY_CUDA_GV_PRO, default on): kernel tests
# (every GEMV case through both prologues and both kernels), e2e, HF fixtures, memcheck of e2e; decode
# speed with it on / off / on (the first run also at 256 and 128K), then `lily-gpu-test chain`.
. .carry/common.sh; synth_bg
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-220
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-220
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_GPU_HF_BF16=tests/gpu/hf_bf16 timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 23 > $L/memcheck.txt 2>&1; el "memcheck e2e rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
LILY_CUDA_GV_PRO=1 timeout 110 $BB --decode 256,4K,32K,128K --out $L/pro1a 2>&1 | grep -E "^decode " | sed "s/^/pro=1 /"
LILY_CUDA_GV_PRO=0 timeout 60 $BB --decode 4K,32K --out $L/pro0 2>&1 | grep -E "^decode " | sed "s/^/pro=0 /"
LILY_CUDA_GV_PRO=1 timeout 60 $BB --decode 4K,32K --out $L/pro1b 2>&1 | grep -E "^decode " | sed "s/^/pro=1 /"
el bench
timeout 200 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -E "^\|" $L/chain.txt
