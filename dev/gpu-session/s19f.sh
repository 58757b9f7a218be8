#!/usr/bin/env bash
# s19f.sh (device, ~4 min; nineteenth session, call 6): phase B's M Delta by single column tiles with
# row blocks paired (3 + 0, 2 + 1), fq (Q S0) through shared memory: every warp the same k-steps, the
# same sums (bitwise: the full-size logits must equal the last build's, lily_old = 684d3d5). GDN tests
# with racecheck/memcheck, e2e, fixtures; prefill 4K/32K against 684d3d5, alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 500; ab_old
gdn_checks
e2e_fix
wait $SP; el synth
cmp_old_logits
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill 4K,32K --decode none --reps 1 --warmup 1 # main and this build alternating, twice
pf_prof 12
safe_end
