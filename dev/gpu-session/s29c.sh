#!/usr/bin/env bash
# s29c.sh (device, ~7 min): the MoE's fixed-point sum (LILY_CUDA_MOE_ACC, default 1): the kernel tests
# (the new gemv fold and moe_fused acc lines), e2e and the HF fixtures with it on, then decode at 4K with it
# off and on, alternating (one binary), and the chain row of moe_fused.
. .carry/common.sh; safe_start 585
synth_bg
timeout 200 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"
grep -E "^FAIL|passed|fixed-point" $L/kernels.txt | cut -c1-250
e2e_fix
grep -E "fixed-point|front" $L/e2e.txt | cut -c1-300
wait $SP; el synth
for v in 0 1 0 1; do
  LILY_CUDA_MOE_ACC=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/MOE_ACC=$v /"
done; el bench
LILY_CHAIN=experts timeout 60 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -E "^\|" $L/chain.txt | head -12
safe_end
