#!/usr/bin/env bash
# decside.sh (device, ~6 min): a GDN layer's z rows on a decode side stream (LILY_CUDA_DEC_SIDE).
# Kernel tests, e2e (its new case: graph and plain launches bitwise equal), HF fixtures with it on,
# the full-size checkpoint's logits over 24 decode steps bitwise with it off and on; then decode
# 4K / 32K A/B, alternating.
. .carry/common.sh; synth_bg; safe_start 560
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head -5
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|side stream" $L/e2e.txt | cut -c1-230
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_CUDA_DEC_SIDE=1 timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures DEC_SIDE=1 rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP; el synth
ids=$(seq -s, 100 137 5000 | head -c 200); ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
for v in 0 1; do LILY_CUDA_DEC_SIDE=$v timeout 120 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out $L/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits DEC_SIDE=$v rc=$?"; done
cmp $L/lg0.f32 $L/lg1.f32 && echo "full-size logits, 24 decode steps: bitwise equal"
env_ab LILY_CUDA_DEC_SIDE --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --prefill none --decode 4K,32K
safe_end
