#!/usr/bin/env bash
# run_gpu.sh: the GPU suite (make test-gpu), on a machine with an NVIDIA GPU: every kernel against its
# CPU reference, the end-to-end checks on a tiny random model, both again under compute-sanitizer
# (memcheck, racecheck) when it is installed. LILY_GPU_FULL=1 adds the full-size model run (needs
# ~40 GB of host memory and a 141 GB GPU; prints the speed tables of docs/PERF.md).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${LILY_GPU_TEST:-$BUILD/lily-gpu-test}
SEED=${LILY_SEED:-$(date +%s)}
pass=0; fail=0
run() { # name, command...
    local name=$1; shift
    echo "== $name"
    if "$@"; then pass=$((pass+1)); echo "PASS $name"; else fail=$((fail+1)); echo "FAIL $name"; fi
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
run kernels "$BIN" kernels "$SEED"
run e2e "$BIN" e2e "$SEED"
if command -v compute-sanitizer >/dev/null; then
    run memcheck-kernels compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" kernels "$SEED"
    run memcheck-e2e compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" e2e "$SEED"
    run racecheck-e2e compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN" e2e "$SEED"
else
    echo "note: compute-sanitizer not found; sanitizer runs skipped"
fi
[ "${LILY_GPU_FULL:-0}" = 1 ] && run full "$BIN" full "${LILY_FULL_POSITIONS:-16}"
echo
echo "$pass passed, $fail failed (seed $SEED)"
[ $fail -eq 0 ]
