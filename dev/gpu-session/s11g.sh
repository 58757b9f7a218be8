#!/usr/bin/env bash
# s11g.sh (device, ~5 min; eleventh session): the closing call again after two fixes: the shared expert
# ran twice when it was on the side stream (the join's error check fell through to the in-line branch:
# the same bits, 4 % of a 4K prefill), and the top-k select's warp read s_need beside the write
# (racecheck warning). Prefill tests, e2e, fixtures, racecheck of the top-k, the base against this
# build (full-size logits, prefill/decode A/B), pfprof 4K, both sweeps.
. .carry/common.sh; synth_bg; safe_start 500; ab_old
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/racecheck_topk.txt 2>&1; el "racecheck topk rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck_topk.txt | head -3
wait $SP; el synth
cmp_old_logits
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 256,512,4K,32K --decode 4K
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -E "plain" $L/pfprof.txt
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dsweep 2>&1 | grep -E "^decode |^#|tok/s|ceiling" | head -10; el "decode sweep"
safe_end
