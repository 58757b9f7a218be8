#!/usr/bin/env bash
# cvt.sh (device, ~3 min): bf16 rounding by one instruction (cvt.rn.bf16.f32) on the GPU. All kernel
# tests (the device rounding against the host's bitwise first), e2e, HF fixtures; decode 4K/32K
# alternating the build before the change (.carry/lily_old.xz) and after.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
ab_checks
wait $SP
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1 --decode 4K,32K
safe_end
