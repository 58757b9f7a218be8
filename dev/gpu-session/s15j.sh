#!/usr/bin/env bash
# s15j.sh (device, ~1 min; fifteenth session, tenth call): where a chunk of phase B goes. A GC_TRACE=1
# build of lily-gpu-test (phase B's warps stamp each section of each chunk) runs the GDN prefill tests and
# timing table; its 4096-token, 4-block calls print the mean cycles a warp a chunk of each section.
. .carry/common.sh; safe_start 200
xz -dc $C/gttrace.xz > /tmp/gttrace && chmod +x /tmp/gttrace
LILY_GPU_PF=gdn timeout 120 /tmp/gttrace prefill 11 > $L/trace.txt 2>&1; el "trace rc=$?"
grep -E "phase B sections|^\| chunked \| 4096" $L/trace.txt | head -12
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv
safe_end
