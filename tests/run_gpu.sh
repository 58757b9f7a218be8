#!/usr/bin/env bash
# run_gpu.sh: the GPU suite (make test-gpu), on a machine with an NVIDIA GPU: every kernel against its
# CPU reference (the decode kernels, then the prefill ones: GEMMs, MoE routing and grouped GEMMs under
# every tail mode, the chunked GDN, flash attention; ~2.5 min on an H200); the end-to-end checks on a tiny random model against the CPU backend; every HF
# fixture against its reference logits (lily-gpu-test fixtures, and `lily logits --backend cuda`
# through tests/py/test_model_fixtures.py in fp32-activation mode when python3 has numpy + pytest, and
# in the default bf16 mode, where prompts take the chunked prefill path, through tests/gpu/cli_prefill.py);
# memcheck/racecheck under compute-sanitizer when it is installed. LILY_GPU_MODEL=DIR adds the
# CPU-vs-GPU comparison and the speed tables on that checkpoint (e.g. `lily synth --preset
# qwen3.6-35b-a3b --out DIR`; docs/PERF.md).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${LILY_GPU_TEST:-$BUILD/lily-gpu-test}
LILY=${LILY_BIN:-$BUILD/lily}
SEED=${LILY_SEED:-$(date +%s)}
pass=0; fail=0
run() { # name, command...
    local name=$1; shift
    echo "== $name"
    if "$@"; then pass=$((pass+1)); echo "PASS $name"; else fail=$((fail+1)); echo "FAIL $name"; fi
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
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
if command -v compute-sanitizer >/dev/null; then
    run memcheck-prefill-cli env LILY_CUDA_PREFILL=1 LILY_CUDA_CHUNK=16 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$LILY" logits --model tests/fixtures/models/mlx-4bit --backend cuda \
        --ids "$(cat tests/fixtures/models/mlx-4bit/ids.txt)" --out /tmp/lily_memcheck_logits.f32
    run memcheck-kernels compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" kernels "$SEED"
    run memcheck-e2e compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" e2e "$SEED"
    run racecheck-e2e compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN" e2e "$SEED"
else
    echo "note: compute-sanitizer not found; sanitizer runs skipped"
fi
if [ -n "${LILY_GPU_MODEL:-}" ]; then
    run compare "$BIN" compare "$LILY_GPU_MODEL" 16 10,40
    run full "$BIN" full "$LILY_GPU_MODEL"
fi
echo
echo "$pass passed, $fail failed (seed $SEED)"
[ $fail -eq 0 ]
