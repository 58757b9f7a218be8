#!/usr/bin/env bash
# front5.sh (device, ~40 s): TRACE build only. The front's out_proj phase stamped finer (x prepared
# 12, split 13, tile 14, rows written 8, barrier 9; router phase x prepared 15, rows 10, barrier 11)
# and the standalone gemv2 out_proj's stamps, for comparison.
. .carry/common.sh; safe_start 200
mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
LILY_CHAIN="layer tail" timeout 120 /tmp/bt/lily-gpu-test chain > $L/trace.txt 2>&1; el trace; grep -E "^\| (layer tail|  the same in one)" -A1 $L/trace.txt | grep trace | cut -c1-620
LILY_CHAIN="GDN out_proj" timeout 120 /tmp/bt/lily-gpu-test chain > $L/trace2.txt 2>&1; el trace2; grep -E "trace|GDN out" $L/trace2.txt | head -3 | cut -c1-400
safe_end
