#!/usr/bin/env bash
# s19c.sh (device, ~8 min; nineteenth session, call 3): the session's prefill changes together:
# phase A on the raw conv outputs (three blocks an SM), the conv pass 8 channels a thread (bitwise the
# scalar pass), the next layer's input norm fused into the MoE combine (bitwise the two launches).
# All prefill tests, e2e, fixtures, cli_prefill, the GDN cases under racecheck/memcheck, memcheck of
# the small prefill tests; full-size prefill logits against main's; prefill 512/4K/32K against main
# (lily_old, f118e40), alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
pf_checks
gdn_checks
wait $SP; el synth
pf_cli
cmp_old_logits
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill 512,4K,32K --decode none --reps 1 --warmup 1 # main and this build alternating, twice
pf_prof 32
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
safe_end
