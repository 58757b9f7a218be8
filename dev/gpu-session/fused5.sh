#!/usr/bin/env bash
# fused5.sh (device, ~2 min): the one-launch MoE with its down slice in registers or copied into
# shared memory (LILY_CUDA_MOE_FUSED_DSM): kernel tests (both, bitwise), e2e, decode 4K/32K
# alternating off / registers / shared memory, ncu duration of each.
. .carry/common.sh; synth_bg; safe_start 300
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|moe fused" $L/kernels.txt | cut -c1-260
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|one-launch" $L/e2e.txt | cut -c1-330
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "0 0" "1 0" "1 1" "0 0" "1 0" "1 1"; do set -- $v; LILY_CUDA_MOE_FUSED=$1 LILY_CUDA_MOE_FUSED_DSM=$2 timeout 60 $BB --decode 4K,32K --out $L/f$1$2 2>&1 | grep -E "^decode " | sed "s/^/fused=$1 dsm=$2 /"; done; el bench
NB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 1 --warmup 0 --decode 256"
for d in 0 1; do LILY_CUDA_MOE_FUSED_DSM=$d timeout 100 ncu --clock-control none --section SpeedOfLight -k regex:moe_fused --launch-skip 60 --launch-count 3 $NB > $L/ncu_d$d.txt 2>&1; el "ncu dsm=$d rc=$?"; grep -E "Duration" $L/ncu_d$d.txt; done
safe_end
