#!/usr/bin/env bash
# s15l.sh (device, ~2 min; fifteenth session, twelfth call): phase B's units balanced (each warp two row
# blocks of one column tile: 0 and 3, or 1 and 2, so every warp's M Delta has the same k-steps). GDN
# timing table of the last commit (6276834, gthead) and this build alternating; the GDN tests and
# racecheck; pfprof 4K; prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
xz -dc $C/gthead.xz > /tmp/gthead && chmod +x /tmp/gthead
for i in 1 2; do
  for v in head new; do
    g=$B/lily-gpu-test; [ $v = head ] && g=/tmp/gthead
    LILY_GPU_PF=gdn timeout 120 $g prefill 11 > $L/gdn_$v$i.txt 2>&1; el "$v rc=$? $(grep -E 'passed' $L/gdn_$v$i.txt | tail -1)"
    grep -E "^\| chunked \| (1024|4096)" $L/gdn_$v$i.txt | sed "s/^/$v /"
  done
done
grep -h FAIL $L/gdn_new*.txt | head -5
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
wait $SP; el synth
pf_prof 8
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none"
for i in 1 2; do
  timeout 100 /tmp/lily_old bench $P --out $L/old$i 2>&1 | grep -E "^prefill " | sed "s/^/base /"
  timeout 100 $B/lily bench $P --out $L/new$i 2>&1 | grep -E "^prefill " | sed "s/^/new  /"
done; el bench
safe_end
