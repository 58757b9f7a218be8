#!/usr/bin/env bash
# s35a.sh (device, ~8 min): gv2_tile on the integer MMA (m16n8k32 s8: codes as bytes, x as four int8 digits per
# group scale), used by gemv2 and moe_fused. All kernel tests, e2e, HF fixtures; the 24 full-size decode steps
# against the build before (not bitwise: cmp_logits.py); gemv2 and moe_fused by ncu in the real step (before /
# after); decode 4K / 32K, three alternating pairs.
. .carry/common.sh; safe_start 570
synth_bg
kernels_grep "gemv2 \(register prologue, tiles|moe fused H=2048|moe front"
e2e_fix
wait $SP; el synth
ab_old
logits_ab || python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_new.f32 248320
ncu_ab moe_fused
ncu_ab gemv2
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
