#!/usr/bin/env bash
# front3.sh (device, ~3 min): where the MoE's front loses. The chain's "layer tail" rows (out_proj,
# router, experts as 3 launches / in one launch / router only in the front), the TRACE build's stamps
# of the same (front phases: rows written, barrier passed), decode 4K/32K alternating front 0 / 1 / 2.
. .carry/common.sh; synth_bg; safe_start 400
LILY_CHAIN="layer tail" timeout 120 $B/lily-gpu-test chain 2>&1 | grep -E "layer tail|the same" | head -8; el chain
mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
LILY_CHAIN="layer tail" timeout 120 /tmp/bt/lily-gpu-test chain > $L/trace.txt 2>&1; el trace; grep -E "layer tail|the same|trace" $L/trace.txt | grep -B1 -A0 "trace" | cut -c1-400 | tail -8
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in 0 1 2 0 1 2; do LILY_CUDA_MOE_FRONT=$v timeout 60 $BB --decode 4K,32K --out $L/fr$v 2>&1 | grep -E "^decode " | sed "s/^/front=$v /"; done; el bench
safe_end
