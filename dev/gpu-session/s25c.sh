#!/usr/bin/env bash
# s25c.sh (device, ~6 min): main 400b967 (the folded map by default, LILY_CUDA_QG_RW 35): e2e (qg_rw 3 and
# 35 bitwise against qgemm_wsw.cu's tile), the HF fixtures, the demo model's fidelity on CUDA, the MoE
# tests on qgemm_rw.cu (the folded cases now only under bit 32); pfprof 4K; the sweep 256, 4K, 32K, 128K
# (LILY_COMMIT set: docs/perf/cuda-400b967.json); an A/B of 3 / 35 / 3 / 35 at 256, 1K, 32K; 39 (the down
# projection on the folded map too) against 35 at 4K.
. .carry/common.sh; safe_start 540
synth_bg
e2e_fix
LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -1 $L/demo.txt
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; el "moerw tests rc=$?"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-200 | head -8
grep -E "e2e prefill with the weights as the register" $L/e2e.txt | cut -c1-200
wait $SP; el synth
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -26
LILY_COMMIT=400b967 timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,4K,32K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep 2>&1 | grep -E "^prefill |tok/s" | head -8; el sweep
for v in 3 35 3 35; do
  LILY_CUDA_QG_RW=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,1K,32K --decode none --reps 2 --warmup 1 --out $L/ab$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"
done; el "a/b"
for v in 35 39 35 39; do
  LILY_CUDA_QG_RW=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K --decode none --reps 1 --warmup 1 --out $L/c$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"
done; el "35/39"
safe_end
