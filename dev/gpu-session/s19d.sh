#!/usr/bin/env bash
# s19d.sh (device, ~6 min; nineteenth session, call 4): the fused combine + next input norm rewritten
# (8 columns a thread, the row in shared memory; call 3's per-column form was 1 ms slower than the two
# launches). All prefill tests (the MoE cases check it bitwise against the two launches), e2e,
# fixtures, cli_prefill; full-size prefill logits against main's; prefill 512/4K/32K against main
# (lily_old, f118e40), alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
pf_checks
wait $SP; el synth
pf_cli
cmp_old_logits
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill 512,4K,32K --decode none --reps 1 --warmup 1 # main and this build alternating, twice
pf_prof 32
safe_end
