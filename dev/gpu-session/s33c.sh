#!/usr/bin/env bash
# s33c.sh (device, ~4 min): gdn.cu's delta-rule arithmetic spelled out with __fmaf_rn / __fmul_rn (the compiler had
# contracted o = gamma b + delta kq differently in gdn_out's instantiation: one value of 4096 a bf16 step apart in
# 10 of s33b's 40 runs, the same seeds both forms). The same 40 seeds again, then every kernel test, e2e, the HF
# fixtures, and decode 4K / 32K against the build before the change (lily_old), alternating.
. .carry/common.sh; safe_start 330
synth_bg
pf=0; for s in $(seq 1 40); do LILY_GPU_KERNELS=gdn timeout 20 $B/lily-gpu-test kernels $((3000+s)) > $L/g_$s.txt 2>&1 || pf=$((pf+1)); done
el "gdn x40 (s33b's seeds): runs failed $pf"; cat $L/g_*.txt | grep -E "^FAIL|gdn_out o differs" | cut -c1-300 | head -10
pf=0; for s in $(seq 1 40); do LILY_GPU_KERNELS=gdn timeout 20 $B/lily-gpu-test kernels $((5000+s)) > $L/h_$s.txt 2>&1 || pf=$((pf+1)); done
el "gdn x40 (new seeds): runs failed $pf"; cat $L/h_*.txt | grep -E "^FAIL|gdn_out o differs" | cut -c1-300 | head -10
kernels_grep "^FAIL"
e2e_fix
wait $SP; el synth
ab_old
AB_N=2 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
