#!/usr/bin/env bash
# prio.sh (device, ~4 min): the main stream's priority (LILY_CUDA_MAIN_PRIO: 1 = highest, this
# session's side-stream commit; 0 = the default, as before). Decode 4K / 32K and prefill 4K / 32K
# (side stream on), alternating.
. .carry/common.sh; synth_bg; safe_start 560
wait $SP; el synth
for i in 1 2; do for v in 0 1; do
    LILY_CUDA_MAIN_PRIO=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 \
        --prefill 4K,32K --decode 4K,32K --out $L/p$v 2>&1 | grep -E "^(prefill|decode) " | sed "s/^/MAIN_PRIO=$v /"
done; done; el bench
safe_end
