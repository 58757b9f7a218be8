#!/usr/bin/env bash
# s15e.sh (device, ~3 min; fifteenth session, fifth call): the chunked GDN with every phase-B operand
# stored in the order its MMA fragments are loaded (the state split once, (fk Delta)^T split once, W, M
# and U written by phase A in fragment order). GDN prefill tests and timing table, racecheck / memcheck
# of them, e2e and fixtures, full-size logits against the base (at the noise floor, s15c), pfprof 4K,
# prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
LILY_GPU_PF=gdn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/gdn.txt 2>&1; rc=$?; el "gdn prefill tests rc=$rc"
grep -E "FAIL|passed" $L/gdn.txt | cut -c1-240 | head -20; grep -A12 "GDN prefill (Hv" $L/gdn.txt
grep "chunked" $L/gdn.txt | grep -E "PASS|FAIL" | cut -c1-250
if grep -q FAIL $L/gdn.txt || [ $rc -ne 0 ]; then safe_end; exit 1; fi
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -2 $L/rc.txt
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck gdn rc=$?"; tail -2 $L/mc.txt
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_new.f32 > $L/lgn.txt 2>&1; el "new logits rc=$?"
python3 .carry/cmp_logits.py /tmp/lg_old.f32 /tmp/lg_new.f32 248320
pf_prof 14
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none"
for i in 1 2; do
  timeout 100 /tmp/lily_old bench $P --out $L/old$i 2>&1 | grep -E "^prefill " | sed "s/^/base /"
  timeout 100 $B/lily bench $P --out $L/new$i 2>&1 | grep -E "^prefill " | sed "s/^/new  /"
done; el bench
safe_end
