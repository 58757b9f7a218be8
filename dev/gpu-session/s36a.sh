#!/usr/bin/env bash
# s36a.sh (device, ~5 min): the router's 8-bit rows on gv2_tile (dev/patches/gemv2-8bit.patch, by ab_prep.sh)
# against main with the down slice on the MMA. All kernel tests (the wild-x gemv cases' first GPU run), e2e, HF
# fixtures; the 24 full-size decode steps against the build before; gemv2 and moe_fused by ncu in the real step;
# decode 4K / 32K, three alternating pairs; memcheck and racecheck of the gemv kernel tests.
. .carry/common.sh; safe_start 540
synth_bg
kernels_grep "x spread wide|gemv2 \(register prologue, tiles|moe fused H=2048"
e2e_fix
wait $SP; el synth
ab_old
logits_ab || python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_new.f32 248320
ncu_ab gemv2
ncu_ab moe_fused
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
for t in memcheck racecheck; do SAN_LIMIT=170 san_bg $t $L/k_$t.txt kernels 31 LILY_GPU_KERNELS=gemv; done
san_wait
for t in memcheck racecheck; do san_report $L/k_$t.txt "$t gemv"; done
safe_end
