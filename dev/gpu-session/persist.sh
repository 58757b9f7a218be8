#!/usr/bin/env bash
# persist.sh (device, ~4 min): e2e + HF fixtures with the default build, decode 4K/32K with the
# latency variants on (new defaults) and off, then the persistent-kernel prototype
# (dev/persist/persist.cu, built here as .carry/persist): its four modes at 40 layers.
. .carry/common.sh; synth_bg
timeout 120 $C/persist 40 10 > $L/persist.txt 2>&1; el "persist rc=$?"; cat $L/persist.txt
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-220
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_GPU_HF_BF16=tests/gpu/hf_bf16 timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "1 1" "0 0" "1 1" "0 0"; do set -- $v
  LILY_CUDA_MOE_LAT=$1 LILY_CUDA_GDN_LAT=$2 timeout 60 $BB --decode 4K,32K --out $L/lat$1$2 2>&1 | grep -E "^decode " | sed "s/^/moe_lat=$1 gdn_lat=$2 /"
done
el bench
