#!/usr/bin/env bash
# s19b.sh (device, ~8 min; nineteenth session, call 2).
#   1. Phase A of the chunked GDN on the raw bf16 conv outputs (one MMA a k-step for QK^T and KK^T,
#      two for W and U; 72 KB of shared memory): the GDN prefill tests and timing table, racecheck and
#      memcheck of the small cases, e2e, fixtures; the full-size prefill logits against main's
#      (lily_old, f118e40) by cmp_logits.py (not bitwise: the products round differently).
#   2. Prefill 4K and 32K: main / this build / this build with phase A capped for 3 blocks an SM
#      (lily3, -DGC_PREP_BLOCKS=3), alternating; pfprof 4K of this build.
#   3. Decode 4K: main / this build (moe_fused's reduction after its barrier with its loads together).
. .carry/common.sh; synth_bg; safe_start 560; ab_old
xz -dc $C/lily3.xz > /tmp/lily3 && chmod +x /tmp/lily3
gdn_checks
e2e_fix
wait $SP; el synth
cmp_old_logits
P="--model /tmp/big --backend cuda --no-plot --prefill 4K,32K --decode none --reps 1 --warmup 1"
for i in 1 2; do
  timeout 60 /tmp/lily_old bench $P --out $L/po$i 2>&1 | grep -E "^prefill " | sed "s/^/old /"
  timeout 60 $B/lily bench $P --out $L/pn$i 2>&1 | grep -E "^prefill " | sed "s/^/new /"
  timeout 60 /tmp/lily3 bench $P --out $L/p3$i 2>&1 | grep -E "^prefill " | sed "s/^/new3 /"
done; el prefill
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 3 --warmup 1 # main and this build alternating, twice
pf_prof 30
safe_end
