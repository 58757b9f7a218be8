#!/usr/bin/env bash
# s29d.sh (device, ~4 min): the GDN layer's gated norm + out_proj in gdn_step's launch (LILY_CUDA_GDN_OUT,
# default 1, with LILY_CUDA_MOE_ACC): the kernel tests (gdn_out, the router's two folds), e2e and the HF
# fixtures, then decode at 4K with it off and on, alternating (one binary).
. .carry/common.sh; safe_start 400
synth_bg
timeout 200 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"
grep -E "^FAIL|passed|gdn_out|gdn \+ gated" $L/kernels.txt | cut -c1-250
e2e_fix
grep -E "^FAIL|fixed-point|front" $L/e2e.txt | cut -c1-330
wait $SP; el synth
for v in 0 1 0 1; do
  LILY_CUDA_GDN_OUT=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 2 --warmup 1 --out $L/ab_$v 2>&1 | grep -E "^decode " | sed "s/^/GDN_OUT=$v /"
done; el bench
safe_end
