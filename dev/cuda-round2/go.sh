#!/usr/bin/env bash
# Device run (round 2, run D: final code): suite with PDL, fixtures (bf16 tolerance), CLI fixture test, memcheck,
# synth at two residual gains + CPU vs GPU compare, speed tables with the PDL ablation, lily bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
T0=$(date +%s)
t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader
t suite; (timeout 120 ./lily-gpu-test kernels 3; timeout 60 ./lily-gpu-test e2e 3) > $OUT/suite.txt 2>&1; grep -E "FAIL|passed|e2e tiny" $OUT/suite.txt | cut -c1-200
t fixtures; LILY_GPU_HF_BF16=tests/gpu/hf_bf16 timeout 60 ./lily-gpu-test fixtures tests/fixtures/models/hf-gqa tests/fixtures/models/hf-sharded tests/fixtures/models/hf-text tests/fixtures/models/mlx-4bit > $OUT/fixtures.txt 2>&1; grep -E "FAIL|passed" $OUT/fixtures.txt | cut -c1-220
t pytest; LILY_BIN=$PWD/lily LILY_TEST_BACKEND=cuda LILY_CUDA_F32ACT=1 timeout 120 python3 -m pytest -q tests/py/test_model_fixtures.py > $OUT/pytest.txt 2>&1; tail -1 $OUT/pytest.txt
t memcheck; timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 ./lily-gpu-test e2e 4 > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|FAIL" $OUT/memcheck.txt | cut -c1-160
for g in 0.1; do
  t synth gain $g; rm -rf /tmp/big; timeout 100 ./lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 2>&1 | tail -1
  t compare gain $g; timeout 120 ./lily-gpu-test compare /tmp/big 16 40 > $OUT/compare_$g.txt 2>&1; grep -v "^lily: cuda" $OUT/compare_$g.txt | grep -v "^-- per" | tail -9 | cut -c1-200
  grep "^lily: cuda: layer" $OUT/compare_$g.txt | awk 'NR%40==1 || NR%40==0 || NR%40==20' | head -3
done
t full; timeout 150 ./lily-gpu-test full /tmp/big > $OUT/full.txt 2>&1; grep -v "^lily: cuda" $OUT/full.txt | tail -46
t done
