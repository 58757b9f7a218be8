#!/usr/bin/env bash
# wide3.sh (device, ~4 min): the wide tile wherever a launch has a wave of blocks (the new rule):
# prefill tests, e2e, fixtures; lily bench prefill rule / no wide tile alternating; pfprof 4K, 64K.
. .carry/common.sh; synth_bg; safe_start 540
pf_checks
wait $SP
for i in 1 2; do for v in 1 0; do
  LILY_CUDA_QG_WIDE=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,1K,2K,4K,8K,32K --decode none --reps 2 --warmup 1 --out $L/bench_$v$i 2>&1 | grep -E "^prefill " | sed "s/^/wide=$v /"
done; done; el bench
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -20
timeout 100 $B/lily-gpu-test pfprof /tmp/big 64K > $L/pfprof64.txt 2>&1; el "pfprof 64K"; grep -v upload $L/pfprof64.txt | head -20
safe_end
