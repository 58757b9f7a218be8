#!/usr/bin/env bash
# suite.sh (device): the GPU test suite on main's carried build (tests/run_gpu.sh: kernels, e2e,
# fixtures, CLI prefill checks, compute-sanitizer), then the prefill kernel tests with timings.
# Optional: fuzz on the spare cores for FUZZ_S seconds (from the repository root: the harnesses
# read fixtures by relative path). Logs to $OUT/logs.tgz.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib
mkdir -p /tmp/b /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ -n "${FUZZ_S:-}" ] && [ -f $C/fuzz.tar.xz ]; then
    mkdir -p /tmp/fz && tar xJf $C/fuzz.tar.xz -C /tmp/fz
    for t in $(ls /tmp/fz); do
        mkdir -p /tmp/corp/$t && cp -r tests/fuzz/corpus/$t/. /tmp/corp/$t/
        ( TIMEFORMAT="$t cpu_user=%U cpu_sys=%S wall=%R"
          { time ASAN_OPTIONS=detect_leaks=1 /tmp/fz/$t -max_total_time=$FUZZ_S -print_final_stats=1 \
                -artifact_prefix=/tmp/logs/$t- $(cat tests/fuzz/$t.options 2>/dev/null) /tmp/corp/$t \
                > /tmp/logs/$t.log 2>&1; } 2>> /tmp/logs/$t.log ) &
    done
fi
LILY_GPU_TEST=/tmp/b/lily-gpu-test LILY_BIN=/tmp/b/lily timeout 420 bash tests/run_gpu.sh > /tmp/logs/gpu.txt 2>&1
echo "run_gpu rc=$?"; grep -E "^(PASS|FAIL)|FAIL|passed" /tmp/logs/gpu.txt | cut -c1-220 | tail -40
timeout 120 /tmp/b/lily-gpu-test prefill $(date +%s) > /tmp/logs/prefill.txt 2>&1; echo "prefill rc=$?"
grep -E "FAIL|passed|ms|GB/s|TFLOP" /tmp/logs/prefill.txt | cut -c1-220 | tail -30
wait
for f in /tmp/logs/fuzz_*.log; do [ -f "$f" ] && grep -E "cpu_user|stat::number_of_executed_units" "$f" | tr '\n' ' ' && echo; done
tar czf $OUT/logs.tgz -C /tmp logs $( [ -d /tmp/corp ] && echo corp )
