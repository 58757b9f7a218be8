#!/usr/bin/env bash
# lean.sh (device, ~2.5 min): gemv2 instantiated per launch shape (LANES, REGS, BULK; branch gv2-lean):
# in_proj's kernel 8,408 -> 2,496 instructions. All kernel tests, e2e, HF fixtures; decode 4K/32K alternating the
# previous build (.carry/lily_old.xz) and this one.
. .carry/common.sh; synth_bg; safe_start 400
xz -dc $C/lily_old.xz > /tmp/lily_old && chmod +x /tmp/lily_old
timeout 150 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1 --decode 4K,32K"
for i in 1 2; do
  timeout 60 /tmp/lily_old bench $A --out $L/old$i 2>&1 | grep -E "^decode " | sed "s/^/old /"
  timeout 60 $B/lily bench $A --out $L/new$i 2>&1 | grep -E "^decode " | sed "s/^/new /"
done; el bench
safe_end
