#!/usr/bin/env bash
# gcsplit.sh (device, ~8 min): (1) what the chunked GDN's 3xTF32 split costs: `lily-gpu-test pfprof`
# at 4K and prefill tok/s with the default build and with a `make NVEXTRA=-DGC_SPLIT=0` build
# (carried as bin-gcs.tar.xz), plus that build's prefill tests (what 1xTF32 does to precision);
# (2) main's decode sweep (256, 4K, 32K, 128K); (3) tests/run_gpu.sh on main's build.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b /tmp/g /tmp/logs; tar xJf $C/bin.tar.xz -C /tmp/b; tar xJf $C/bin-gcs.tar.xz -C /tmp/g
B=/tmp/b; L=/tmp/logs
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -f /tmp/big/config.json ] || $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1; el synth
for v in b g b g; do
  timeout 60 /tmp/$v/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof_$v.txt 2>&1
  echo "== build $v (b = default 3xTF32, g = GC_SPLIT=0)"; grep -E "total|chunked|plain|tok/s" $L/pfprof_$v.txt | head -5
done; el pfprof
for v in b g; do
  timeout 90 /tmp/$v/lily bench --model /tmp/big --backend cuda --no-plot --prefill 2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/pf_$v 2>&1 | grep -E "^prefill " | sed "s/^/build $v /"
done; el "prefill bench"
timeout 100 /tmp/g/lily-gpu-test prefill 11 > $L/prefill_g.txt 2>&1; el "prefill tests, GC_SPLIT=0 rc=$?"; grep -E "FAIL|passed" $L/prefill_g.txt | cut -c1-200 | head -20
timeout 60 /tmp/g/lily-gpu-test e2e 11 > $L/e2e_g.txt 2>&1; el "e2e, GC_SPLIT=0 rc=$?"; grep -E "FAIL|passed" $L/e2e_g.txt | cut -c1-200 | head -20
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dec 2>&1 | grep -E "^decode |ceiling|copy"; el "decode sweep"
LILY_GPU_TEST=$B/lily-gpu-test LILY_BIN=$B/lily timeout 330 bash tests/run_gpu.sh > $L/gpu.txt 2>&1
el "run_gpu rc=$?"; grep -E "^(PASS|FAIL)|FAIL|passed|ERROR SUMMARY|hazard" $L/gpu.txt | cut -c1-200 | tail -30
