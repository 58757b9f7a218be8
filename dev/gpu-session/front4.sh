#!/usr/bin/env bash
# front4.sh (device, ~3 min): the MoE's front, run on a build with two changes main does not have
# (each front phase's first tile staged in shared memory at entry; gdn_kernel capped at 80 registers;
# both measured no better, docs/PERF.md). MoE/GDN kernel tests, e2e, the chain's layer-tail rows and
# their trace, decode 4K/32K alternating front 0 / 1 / 2.
. .carry/common.sh; synth_bg; safe_start 400
for f in moe gdn; do LILY_GPU_KERNELS=$f timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/k$f.txt 2>&1; el "kernels $f rc=$?"; grep -E "FAIL|passed" $L/k$f.txt | cut -c1-200; done
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|front" $L/e2e.txt | cut -c1-200
LILY_CHAIN="layer tail" timeout 120 $B/lily-gpu-test chain 2>&1 | grep -E "^\| (layer tail|  the same in one|  the same, router)" | head -8; el chain
mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
LILY_CHAIN="layer tail" timeout 120 /tmp/bt/lily-gpu-test chain > $L/trace.txt 2>&1; el trace; grep -E "^\| (layer tail|  the same in one)" -A1 $L/trace.txt | grep trace | cut -c1-420
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in 0 1 2 0 1 2; do LILY_CUDA_MOE_FRONT=$v timeout 60 $BB --decode 4K,32K --out $L/fr$v 2>&1 | grep -E "^decode " | sed "s/^/front=$v /"; done; el bench
safe_end
