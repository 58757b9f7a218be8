#!/usr/bin/env bash
# s17d.sh (device, ~8 min; seventeenth session, fourth call): the final main (63affd0: the mma.sync GEMM's
# copies found once, split-K for thin dense calls of short prompts, 3 stages): the prefill tests, e2e,
# the HF fixtures, cli_prefill, memcheck of the small prefill tests; the closing sweep (prefill 256 ..
# 128K, decode 4K).
. .carry/common.sh; synth_bg; safe_start 560; export LILY_COMMIT=${LILY_COMMIT:-unknown}
pf_checks
grep -cE "PASS qgemm split-K" $L/prefill.txt
pf_cli
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP; el synth
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 4K --reps 1 --warmup 1 --out $OUT/cuda-63affd0 > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
safe_end
