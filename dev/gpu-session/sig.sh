#!/usr/bin/env bash
# sig.sh (device, ~1.5 min): sigmoid back on the IEEE division. The GDN kernel test on the seed that
# failed with __fdividef (1796044562) and 6 more, all kernel tests, e2e, HF fixtures, demo fidelity;
# prefill 4K and decode 4K/32K of this build.
. .carry/common.sh; synth_bg; safe_start 300
for s in 1796044562 1 2 3 4 5 6; do LILY_GPU_KERNELS=gdn timeout 30 $B/lily-gpu-test kernels $s 2>&1 | grep -E "^FAIL|passed" | sed "s/^/seed $s: /"; done; el gdn
timeout 150 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|seed" $L/kernels.txt | cut -c1-200
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -1 $L/demo.txt
wait $SP
timeout 90 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K --decode 4K,32K --reps 3 --warmup 1 --out $L/final 2>&1 | grep -E "^(decode|prefill) "; el bench
safe_end
