#!/usr/bin/env bash
# s18b.sh (device, ~2 min; eighteenth session, call 2): where moe_fused's ~19 us go. The TRACE=1
# build's chain rows of the experts (points 12-15: gate rows arrived, h computed, down slice arrived,
# grid barrier passed), with the down slice by tensor maps (default) and by 16-byte loads.
. .carry/common.sh; safe_start 300
mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
LILY_CHAIN=experts timeout 120 /tmp/bt/lily-gpu-test chain > $L/chain_tma.txt 2>&1; el "chain tma rc=$?"; grep -E "moe_fused|trace|experts" $L/chain_tma.txt | cut -c1-600
LILY_CUDA_MOE_FUSED_TMA=0 LILY_CHAIN=experts timeout 120 /tmp/bt/lily-gpu-test chain > $L/chain_ld.txt 2>&1; el "chain loads rc=$?"; grep -E "moe_fused|trace" $L/chain_ld.txt | cut -c1-600
safe_end
