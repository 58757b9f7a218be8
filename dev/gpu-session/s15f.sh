#!/usr/bin/env bash
# s15f.sh (device, ~3 min; fifteenth session, sixth call): phase B's L2 prefetch of each chunk's record a
# chunk ahead of its copies. GDN timing table without it (GC_PF=0) and with it, alternating; the GDN
# tests and their sanitizers with it; pfprof 4K; prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
xz -dc $C/gtnopf.xz > /tmp/gtnopf && chmod +x /tmp/gtnopf
gdn_tables nopf /tmp/gtnopf pf $B/lily-gpu-test
gdn_checks
wait $SP; el synth
pf_prof 8
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
