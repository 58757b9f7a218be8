#!/usr/bin/env bash
# s15h.sh (device, ~3 min; fifteenth session, eighth call): phase A's off-diagonal inverse blocks as MMAs
# (and its B operand without a division per element), phase B's copies as bulk copies on mbarriers.
# GDN timing table of the last commit (62066aa, gtprev) and this build alternating; the GDN tests and
# their sanitizers; e2e and fixtures; pfprof 4K; prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
xz -dc $C/gtprev.xz > /tmp/gtprev && chmod +x /tmp/gtprev
gdn_tables prev /tmp/gtprev new $B/lily-gpu-test
gdn_checks
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/sc.txt 2>&1; el "synccheck gdn rc=$?"; tail -1 $L/sc.txt
e2e_fix
wait $SP; el synth
pf_prof 8
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
