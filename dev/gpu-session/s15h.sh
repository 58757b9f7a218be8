#!/usr/bin/env bash
# s15h.sh (device, ~3 min; fifteenth session, eighth call): phase A's off-diagonal inverse blocks as MMAs
# (and its B operand without a division per element), phase B's copies as bulk copies on mbarriers.
# GDN timing table of the last commit (62066aa, gtprev) and this build alternating; the GDN tests and
# their sanitizers; e2e and fixtures; pfprof 4K; prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
xz -dc $C/gtprev.xz > /tmp/gtprev && chmod +x /tmp/gtprev
for i in 1 2; do
  for v in prev new; do
    g=$B/lily-gpu-test; [ $v = prev ] && g=/tmp/gtprev
    LILY_GPU_PF=gdn timeout 120 $g prefill 11 > $L/gdn_$v$i.txt 2>&1; el "$v rc=$? $(grep -E 'passed' $L/gdn_$v$i.txt | tail -1)"
    grep -E "^\| chunked \| (1024|4096)" $L/gdn_$v$i.txt | sed "s/^/$v /"
  done
done
grep -h FAIL $L/gdn_new*.txt | head -5
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/sc.txt 2>&1; el "synccheck gdn rc=$?"; tail -1 $L/sc.txt
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck gdn rc=$?"; tail -1 $L/mc.txt
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP; el synth
pf_prof 8
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none"
for i in 1 2; do
  timeout 100 /tmp/lily_old bench $P --out $L/old$i 2>&1 | grep -E "^prefill " | sed "s/^/base /"
  timeout 100 $B/lily bench $P --out $L/new$i 2>&1 | grep -E "^prefill " | sed "s/^/new  /"
done; el bench
safe_end
