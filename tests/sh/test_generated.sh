#!/usr/bin/env bash
# test_generated.sh: the committed generated sources match their generators, so that neither is edited
# alone. src/cuda/wgmma_rs.cuh (the register-A wgmma instructions, one operand list per N) comes from
# tools/gen_wgmma_rs.py.
set -u
cd "$(dirname "$0")/../.."
PY=${LILY_PY:-python3}
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
"$PY" tools/gen_wgmma_rs.py > "$tmp" || { echo "FAIL: tools/gen_wgmma_rs.py did not run"; exit 1; }
if ! cmp -s "$tmp" src/cuda/wgmma_rs.cuh; then
    echo "FAIL: src/cuda/wgmma_rs.cuh differs from tools/gen_wgmma_rs.py's output; regenerate it:"
    echo "    python3 tools/gen_wgmma_rs.py > src/cuda/wgmma_rs.cuh"
    diff "$tmp" src/cuda/wgmma_rs.cuh | head -20
    exit 1
fi
echo "ok: src/cuda/wgmma_rs.cuh is tools/gen_wgmma_rs.py's output"
