#!/usr/bin/env bash
# s22b.sh (device, ~1 min; ran on branch s22b, f21b1d9: LILY_CUDA_QG_SPLITK 3 and 4 are not on main): split-K for the 8-bit router
# (LILY_CUDA_QG_SPLITK=3), or for every call of 256 columns and more (4: the router, attention's k and v),
# against the engine's rule (1). e2e with 3 (its splits differ from the unsplit call by fp32 reassociation
# only: the kernel tests' split passes cover the code), then prefill alternating, then pfprof 4K with 1 and 3.
. .carry/common.sh; synth_bg; safe_start 400
LILY_CUDA_QG_SPLITK=3 timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
wait $SP; el synth
for i in 1 2; do for m in 1 3 4; do
  LILY_CUDA_QG_SPLITK=$m timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 1K,2K,4K,8K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/splitk=$m /"
done; done; el bench
for m in 1 3; do LILY_CUDA_QG_SPLITK=$m timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$m.txt 2>&1; el "pfprof $m rc=$?"; grep -E "router|routing|total|ms plain" $L/pfprof$m.txt | head -6; done
safe_end
