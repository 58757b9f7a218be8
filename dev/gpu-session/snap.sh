#!/usr/bin/env bash
# snap.sh (device, ~4 min): the prefix cache's snapshots in device memory (lily_backend.snap_save). e2e (the
# snapshot cases in device and host memory), then srv.sh's server timings for: no cache, the defaults
# (device snapshots every 4096 tokens), host snapshots (LILY_CUDA_SNAP_DEV=0), device snapshots every 16384.
. .carry/common.sh; synth_bg; safe_start 560
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|prefix-cache" $L/e2e.txt | cut -c1-220
wait $SP; SRV_SAFE=500 SRV_SETTINGS="nocache|-|--cache-mb 0;defaults|-|;host|LILY_CUDA_SNAP_DEV=0|;snap16k|-|--snapshot-every 16384" bash .carry/srv.sh
safe_end
