#!/usr/bin/env bash
# s26a.sh (device, ~7 min): the GDN in_proj's qkv, b and a as one GEMM over their stacked weights
# (LILY_CUDA_GDN_INPROJ, default 1): the GDN prefill tests (the stacked layout every other case), e2e and the
# HF fixtures, then prefill 4K with the switch 0 / 1 (twice each, alternating), once without the side
# stream, and pfprof at 4K.
. .carry/common.sh; safe_start 560
synth_bg
gdn_checks
e2e_fix
wait $SP; el synth
env_ab LILY_CUDA_GDN_INPROJ --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --decode none --prefill 4K
LILY_CUDA_PF_SIDE=0 timeout 80 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --decode none --prefill 4K --out $L/bside 2>&1 | grep -E "^prefill " | sed "s/^/side0 /"; el "rc=$?"
pf_prof 40
safe_end
