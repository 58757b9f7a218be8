#!/usr/bin/env bash
# s15f.sh (device, ~3 min; fifteenth session, sixth call): phase B's L2 prefetch of each chunk's record a
# chunk ahead of its copies. GDN timing table without it (GC_PF=0) and with it, alternating; the GDN
# tests and their sanitizers with it; pfprof 4K; prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
xz -dc $C/gtnopf.xz > /tmp/gtnopf && chmod +x /tmp/gtnopf
for i in 1 2; do
  for v in nopf pf; do
    g=$B/lily-gpu-test; [ $v = nopf ] && g=/tmp/gtnopf
    LILY_GPU_PF=gdn timeout 120 $g prefill 11 > $L/gdn_$v$i.txt 2>&1; el "$v rc=$? $(grep -E 'passed' $L/gdn_$v$i.txt | tail -1)"
    grep -E "^\| chunked \| (1024|4096)" $L/gdn_$v$i.txt | sed "s/^/$v /"
  done
done
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck gdn rc=$?"; tail -1 $L/mc.txt
wait $SP; el synth
pf_prof 8
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none"
for i in 1 2; do
  timeout 100 /tmp/lily_old bench $P --out $L/old$i 2>&1 | grep -E "^prefill " | sed "s/^/base /"
  timeout 100 $B/lily bench $P --out $L/new$i 2>&1 | grep -E "^prefill " | sed "s/^/new  /"
done; el bench
safe_end
