#!/usr/bin/env bash
# run_gpu.sh: the GPU suite (make test-gpu), on a machine with an NVIDIA GPU: every kernel against its
# CPU reference (the decode kernels, then the prefill ones: GEMMs, MoE routing and grouped GEMMs under
# every tail mode, the chunked GDN, flash attention; ~2.5 min on an H200); the end-to-end checks on a tiny random model against the CPU backend; every HF
# fixture against its reference logits (lily-gpu-test fixtures, and `lily logits --backend cuda`
# through tests/py/test_model_fixtures.py in fp32-activation mode when python3 has numpy + pytest, and
# in the default bf16 mode, where prompts take the chunked prefill path, through tests/gpu/cli_prefill.py);
# memcheck/racecheck under compute-sanitizer when it is installed (LILY_GPU_SAN_PAR=1: those at once; every
# group's line ends with the seconds since the start; LILY_GPU_SAN=0 skips them, LILY_GPU_SAN=only runs them
# alone, so two runs side by side cover the suite in the time of its longest part). LILY_GPU_MODEL=DIR adds the
# CPU-vs-GPU comparison and the speed tables on that checkpoint (e.g. `lily synth --preset
# qwen3.6-35b-a3b --out DIR`; docs/PERF.md).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${LILY_GPU_TEST:-$BUILD/lily-gpu-test}
LILY=${LILY_BIN:-$BUILD/lily}
SEED=${LILY_SEED:-$(date +%s)}
pass=0; fail=0; t0=$(date +%s)
tally() { # name, exit status: count it and print the group's line
    if [ "$2" = 0 ]; then pass=$((pass+1)); echo "PASS $1 [$(( $(date +%s) - t0 )) s]"; else fail=$((fail+1)); echo "FAIL $1 [$(( $(date +%s) - t0 )) s]"; fi
}
run() { # name, command...
    local name=$1; shift
    echo "== $name"
    "$@"; tally "$name" $?
}
# LILY_GPU_SAN_PAR=1: the sanitizer runs at once, each into its own log, printed in order when all have
# ended (the suite's wall time is then the longest of them, racecheck of e2e, instead of their sum).
SAN_DIR=; san_names=(); san_pids=()
san() { # name, command...: run now, or in the background with LILY_GPU_SAN_PAR=1
    if [ "${LILY_GPU_SAN_PAR:-0}" = 1 ]; then
        local name=$1; shift
        [ -n "$SAN_DIR" ] || SAN_DIR=$(mktemp -d)
        ( "$@" > "$SAN_DIR/$name.log" 2>&1; echo $? > "$SAN_DIR/$name.rc" ) &
        san_names+=("$name"); san_pids+=($!)
    else
        run "$@"
    fi
}
san_wait() {
    local i name rc
    for i in "${!san_names[@]}"; do
        name=${san_names[$i]}; wait "${san_pids[$i]}"
        echo "== $name"; cat "$SAN_DIR/$name.log"
        rc=$(cat "$SAN_DIR/$name.rc" 2>/dev/null || echo 1)
        tally "$name" "$rc"
    done
    [ -z "$SAN_DIR" ] || rm -rf "$SAN_DIR"
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
SAN=${LILY_GPU_SAN:-1}
if [ "$SAN" != only ]; then
    run kernels "$BIN" kernels "$SEED"
    run prefill "$BIN" prefill "$SEED"
    run e2e "$BIN" e2e "$SEED"
    run fixtures env LILY_GPU_HF_BF16=tests/gpu/hf_bf16 "$BIN" fixtures $FIX
    if python3 -c 'import numpy, pytest' 2>/dev/null; then
        run cli-fixtures env LILY_BIN="$LILY" LILY_TEST_BACKEND=cuda LILY_CUDA_F32ACT=1 \
            python3 -m pytest -q tests/py/test_model_fixtures.py
    else
        echo "note: python3 without numpy/pytest; lily logits --backend cuda fixture test skipped"
    fi
    if python3 -c 'import numpy' 2>/dev/null; then
        run cli-prefill env LILY_BIN="$LILY" python3 tests/gpu/cli_prefill.py
    fi
fi
if [ "$SAN" = 0 ]; then
    echo "note: LILY_GPU_SAN=0; sanitizer runs skipped"
elif command -v compute-sanitizer >/dev/null; then
    san memcheck-prefill-cli env LILY_CUDA_PREFILL=1 LILY_CUDA_CHUNK=16 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$LILY" logits --model tests/fixtures/models/mlx-4bit --backend cuda \
        --ids "$(cat tests/fixtures/models/mlx-4bit/ids.txt)" --out /tmp/lily_memcheck_logits.f32
    san memcheck-kernels compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" kernels "$SEED"
    san memcheck-e2e compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" e2e "$SEED"
    san racecheck-e2e compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN" e2e "$SEED"
    san_wait
else
    echo "note: compute-sanitizer not found; sanitizer runs skipped"
fi
if [ -n "${LILY_GPU_MODEL:-}" ] && [ "$SAN" != only ]; then
    run compare "$BIN" compare "$LILY_GPU_MODEL" 16 10,40
    run full "$BIN" full "$LILY_GPU_MODEL"
fi
echo
echo "$pass passed, $fail failed (seed $SEED)"
[ $fail -eq 0 ]
