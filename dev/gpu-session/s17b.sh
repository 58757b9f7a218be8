#!/usr/bin/env bash
# s17b.sh (device, ~8 min; seventeenth session, second call): the mma.sync GEMM's copies found once per
# thread (not per stage) and split-K for thin dense calls (router, GDN b/a, short prompts' k/v):
# the prefill tests (with the new split-K cases), e2e, the HF fixtures; pfprof at 256, 1K and 4K; the
# split-K switch A/B (LILY_CUDA_QG_SPLITK 0/1) over 256 .. 4K.
. .carry/common.sh; safe_start 540
synth_bg
pf_checks
grep -E "split-K" $L/prefill.txt | cut -c1-200
wait $SP; el synth
timeout 200 $B/lily-gpu-test pfprof /tmp/big 256,1K,4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"
grep -E "^prefill of|router|b, a|k, v|gate\|up|experts down|shared" $L/pfprof.txt
env_ab LILY_CUDA_QG_SPLITK --model /tmp/big --backend cuda --no-plot --reps 3 --warmup 1 --prefill 256,512,1K,2K,4K --decode none
safe_end
