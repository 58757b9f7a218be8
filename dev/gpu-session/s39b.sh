#!/usr/bin/env bash
# s39b.sh (device, ~4 min; thirty-ninth session): the landed build (gemv2's flag fix, the fused split by default,
# the combine's loads all at once by default) against HEAD before them (lily_old.xz / gt_old.xz from ab_prep.sh;
# the new build carried by prep.sh): every kernel test, e2e and the HF fixtures of the new build; the 24 full-size
# decode steps, old against new (bitwise expected); decode 4K three alternating pairs, 32K two.
. .carry/common.sh; safe_start 330
synth_bg; ab_old
ab_checks
wait $SP; el synth
logits_ab
D="--model /tmp/big --backend cuda --no-plot --prefill none --reps 2 --warmup 1"
arms() { # CONTEXTS ROUNDS
    local i; for i in $(seq $2); do
        timeout 100 /tmp/lily_old bench $D --decode $1 --out $L/o$1$i 2>&1 | grep -E "^decode " | sed "s/^/old /"
        timeout 100 $B/lily bench $D --decode $1 --out $L/n$1$i 2>&1 | grep -E "^decode " | sed "s/^/new /"
    done; el "bench $1"
}
arms 4K 3
arms 32K 2
safe_end
