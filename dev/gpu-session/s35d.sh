#!/usr/bin/env bash
# s35d.sh (device, ~5 min): moe_fused's down slice on the integer MMA (mf_down_tile: h's 32 values as gv2_tile's
# four int8 digits, one m16n8k32 a 16-row tile; the register path the same integers by scalar multiply-adds, so
# both give the same bits). Against 85fc22e: the moe kernel tests and all others, e2e, HF fixtures, the 24
# full-size decode steps (cmp_logits.py), moe_fused by ncu in the real step, decode 4K / 32K three alternating
# pairs; then memcheck and racecheck of the moe kernel tests.
. .carry/common.sh; safe_start 500
synth_bg
kernels_grep "moe fused H=2048|moe fused H=640|moe front"
e2e_fix
wait $SP; el synth
ab_old
logits_ab || python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_new.f32 248320
ncu_ab moe_fused
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
for t in memcheck racecheck; do SAN_LIMIT=150 san_bg $t $L/k_$t.txt kernels 29 LILY_GPU_KERNELS=moe; done
san_wait
for t in memcheck racecheck; do san_report $L/k_$t.txt "$t moe"; done
safe_end
