#!/usr/bin/env bash
# comb.sh (device, ~5 min): the MoE's gather (a warp per row, 8 rows a block) and combine (column pairs,
# every load first). Prefill tests, e2e, fixtures, cli_prefill, memcheck; full-size prefill logits of a
# 300-token prompt bitwise equal to the session's base (.carry/lily_old.xz, fd1baa4); pfprof 4K; the
# base and this build alternating (prefill 512, 4K, 32K).
. .carry/common.sh; synth_bg; safe_start 545; ab_old
pf_checks
pf_cli
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_new.f32 > $L/lgn.txt 2>&1; el "new logits rc=$?"
cmp /tmp/lg_old.f32 /tmp/lg_new.f32 && echo "full-size prefill logits (300 tokens): bitwise equal to the session's base"
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -E "plain|combine|gathered" $L/pfprof.txt
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
