#!/usr/bin/env bash
# s29b.sh (device, ~5 min): the prefill kernel tests with the twenty-sixth session's failing seed and with a fresh
# one: since the twenty-eighth session's last commit (compiled, not run on the GPU then) the GDN references take
# the GPU's beta (gdn_beta_gpu) and a new line checks beta over every bf16 logit in [-80, 80] against the CPU's.
. .carry/common.sh; safe_start 400
for s in 1796285961 $(date +%s); do
  timeout 180 $B/lily-gpu-test prefill $s > $L/prefill_$s.txt 2>&1; el "prefill seed $s rc=$?"
  grep -E "^FAIL|passed|gdn beta" $L/prefill_$s.txt | cut -c1-240
done
safe_end
