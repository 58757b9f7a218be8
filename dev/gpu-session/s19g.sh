#!/usr/bin/env bash
# s19g.sh (device, ~5 min; nineteenth session, call 7): the prefill's q/k norm + RoPE + KV append a
# block a token (its heads in two 128-thread groups, the loads of 8 heads together, the RoPE factors
# once; the block-a-head form ran 73,728 short blocks at 4K). All prefill tests (a new case family
# compares it bitwise with the decode kernel token by token), e2e, fixtures, cli_prefill; the
# full-size prefill logits must be bitwise 684d3d5's (lily_old); prefill 4K/32K against it; pfprof.
. .carry/common.sh; synth_bg; safe_start 440; ab_old
pf_checks
grep -E "q/k norm \+ rope" $L/prefill.txt | cut -c1-200 | head -8
wait $SP; el synth
cmp_old_logits
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill 4K,32K --decode none --reps 1 --warmup 1 # main and this build alternating, twice
pf_prof 24
pf_cli
safe_end
