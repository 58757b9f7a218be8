#!/usr/bin/env bash
# pfnext.sh (device, ~6 min): the lm_head GEMV requesting each block's next tile towards L2
# (LILY_CUDA_GV_PF_NEXT, KB). Prefill tests (the side-stream MoE test as landed), e2e with the knob off
# and at 64 KB, HF fixtures at 64 KB; decode 256 / 4K with 0, 32, 128 KB, twice.
. .carry/common.sh; synth_bg; safe_start 560
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -E "moe prefill" $L/prefill.txt | cut -c1-60,300-420 | head -8
for v in 0 64; do LILY_CUDA_GV_PF_NEXT=$v timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e$v.txt 2>&1; el "e2e PF_NEXT=$v rc=$?"; grep -E "FAIL|passed" $L/e2e$v.txt | cut -c1-260; done
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_CUDA_GV_PF_NEXT=64 timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP; el synth
for i in 1 2; do for v in 0 32 128; do
    LILY_CUDA_GV_PF_NEXT=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --prefill none \
        --decode 256,4K --out $L/pn$v 2>&1 | grep -E "^decode " | sed "s/^/PF_NEXT=$v /"
done; done; el bench
safe_end
