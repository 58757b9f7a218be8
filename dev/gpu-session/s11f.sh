#!/usr/bin/env bash
# s11f.sh (device, ~3 min; eleventh session): 64-row bf16-weight tiles by tensor-map loads
# (LILY_CUDA_QG_TMA128=1; 2 = the 128-row tiles only, as before): prefill tests, pfprof 4K both ways,
# bench A/B at short and long prompts.
. .carry/common.sh; synth_bg; safe_start 330
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "tensor-map loads" $L/prefill.txt
wait $SP; el synth
for v in 1 2; do LILY_CUDA_QG_TMA128=$v timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; echo "== pfprof tma128 $v"; grep -E "grouped gemm|router|b, a|plain" $L/pfprof$v.txt; done; el pfprof
for v in 2 1 2 1; do LILY_CUDA_QG_TMA128=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 256,512,1K,4K,32K --decode none --out $L/t$v 2>&1 | grep -E "^prefill " | sed "s/^/tma128=$v /"; done; el "A/B"
safe_end
