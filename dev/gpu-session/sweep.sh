#!/usr/bin/env bash
# sweep.sh (device): synthesize the full-size model if absent, then one part of the lily bench sweep.
# PART=short: prefill and decode 256..32K, 3 reps; PART=long: prefill 64K,128K and decode 64K,128K,
# 1 rep (each alone is minutes: keep each part in its own call). JSON to $OUT (rewritten per point).
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_COMMIT=${LILY_COMMIT:-unknown}
[ -x /tmp/b/lily ] || { mkdir -p /tmp/b && tar xJf $C/bin.tar.xz -C /tmp/b; }
[ -f /tmp/big/config.json ] || /tmp/b/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 2>&1 | tail -1
B="/tmp/b/lily bench --model /tmp/big --backend cuda --no-plot"
case "${PART:-short}" in
short) timeout 560 $B --lengths 256,512,1K,2K,4K,8K,16K,32K --reps 3 --warmup 1 --out $OUT/cuda-short ;;
long)  timeout 560 $B --lengths 64K,128K --reps 1 --warmup 0 --out $OUT/cuda-long ;;
esac 2>&1 | grep -v upload
