#!/usr/bin/env bash
# s20a.sh (device, ~3 min; written in the nineteenth session on branch s20-prep, NOT RUN: no device time
# was left). The GDN gated norm 8 values a lane (16-byte loads; LILY_CUDA_GN_VEC=0 keeps the warp-a-head
# form): the GDN tests with the gated-norm shapes of both forms against the CPU, e2e, fixtures; prefill
# 4K/32K with the switch 0 / 1 alternating; pfprof 4K (the gated norm was 1.58 ms of 91.9).
. .carry/common.sh; synth_bg; safe_start 400
gdn_checks
e2e_fix
wait $SP; el synth
env_ab LILY_CUDA_GN_VEC --model /tmp/big --backend cuda --no-plot --prefill 4K,32K --decode none --reps 1 --warmup 1
pf_prof 24
safe_end
