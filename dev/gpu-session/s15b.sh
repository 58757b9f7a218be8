#!/usr/bin/env bash
# s15b.sh (device, ~6 min; fifteenth session, second call): the chunked GDN on raw bf16 q/k (phase B
# multiplies the conv outputs, the row factors after the product). GDN prefill tests and timing table,
# racecheck / memcheck of them, e2e and fixtures, full-size logits against the base (tolerance: not
# bitwise by design), pfprof 4K, prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
gdn_checks || { safe_end; exit 1; }
e2e_fix
wait $SP; el synth
cmp_old_logits
pf_prof 14
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
