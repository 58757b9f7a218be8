#!/usr/bin/env bash
# front.sh (device, ~4 min): moe_fused with its front (LILY_CUDA_MOE_FRONT: the layer's out_proj /
# o_proj and the norm + router + shared gate/up inside the MoE's launch). MoE and GEMV kernel tests
# (the front bitwise against separate launches), memcheck and racecheck of the front's cases, e2e,
# HF fixtures, then decode 4K/32K alternating front off / on, and the step's per-kernel profile.
. .carry/common.sh; synth_bg; safe_start 540
LILY_GPU_KERNELS=moe timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels moe rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-300
LILY_GPU_KERNELS=gemv timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kgemv.txt 2>&1; el "kernels gemv rc=$?"; grep -E "FAIL|passed" $L/kgemv.txt | cut -c1-200
LILY_GPU_KERNELS=moe timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck moe rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt | head -5
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch|front" $L/e2e.txt | cut -c1-330
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in 0 1 0 1; do LILY_CUDA_MOE_FRONT=$v timeout 60 $BB --decode 4K,32K --out $L/fr$v 2>&1 | grep -E "^decode " | sed "s/^/front=$v /"; done; el bench
timeout 100 $B/lily-gpu-test full /tmp/big > $L/full.txt 2>&1; el "full rc=$?"; grep -A22 -iE "per-kernel|breakdown" $L/full.txt | head -30
safe_end
