#!/usr/bin/env bash
# gpu_prefill_run.sh: one device run of the prefill kernels (lily-gpu-test prefill), for a machine
# where the binary was built elsewhere. Writes logs to $OUT (default ./out-prefill):
#   prefill.log   every prefill kernel vs its CPU reference, then timings at the full model's shapes
#                 against the copy and cuBLAS GEMM ceilings measured in the same run
#   memcheck.log  compute-sanitizer memcheck on the small cases (skipped when not installed)
#   sass.txt      HMMA / HGMMA counts and register use of the GEMM kernels (when cuobjdump exists)
# Usage: tools/gpu_prefill_run.sh [path/to/lily-gpu-test]   (default .carry/lily-gpu-test, then
# build/lily-gpu-test). Runtime well under 4 minutes on an H200. Exit 0 only if every step passed.
set -u
BIN=${1:-${LILY_GPU_TEST:-}}
if [ -z "$BIN" ]; then
    for b in .carry/lily-gpu-test build/lily-gpu-test; do [ -x "$b" ] && BIN=$b && break; done
fi
[ -x "${BIN:-}" ] || { echo "no lily-gpu-test binary (give its path)"; exit 2; }
OUT=${OUT:-out-prefill}
mkdir -p "$OUT"
SEED=${LILY_SEED:-$(date +%s)}
fail=0
{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    echo "binary: $BIN  seed: $SEED"
} | tee "$OUT/info.txt"

echo "== prefill tests + bench"
timeout 170 "$BIN" prefill "$SEED" bench > "$OUT/prefill.log" 2>&1
rc=$?; echo "rc $rc" >> "$OUT/prefill.log"
grep -E "^(PASS|FAIL)|passed|CUDA error" "$OUT/prefill.log"
[ $rc -eq 0 ] || fail=1

if command -v compute-sanitizer >/dev/null; then
    echo "== memcheck (small cases)"
    timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" prefill "$SEED" small > "$OUT/memcheck.log" 2>&1
    rc=$?; echo "rc $rc" >> "$OUT/memcheck.log"
    tail -n 3 "$OUT/memcheck.log"
    [ $rc -eq 0 ] || fail=1
else
    echo "compute-sanitizer not found: memcheck skipped" | tee "$OUT/memcheck.log"
fi

if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$BIN" > "$OUT/sass.full" 2>&1
    { echo "HMMA: $(grep -c HMMA "$OUT/sass.full")  HGMMA: $(grep -c HGMMA "$OUT/sass.full")";
      echo "LDL/STL in qgemm: $(awk '/Function : .*qgemm/{f=1} /Function : /&&!/qgemm/{f=0} f' "$OUT/sass.full" | grep -c 'LDL\|STL')"; } > "$OUT/sass.txt"
    rm -f "$OUT/sass.full"
    cat "$OUT/sass.txt"
fi
echo "overall: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
