#!/usr/bin/env bash
# s15l.sh (device, ~2 min; fifteenth session, twelfth call): phase B's units balanced (each warp two row
# blocks of one column tile: 0 and 3, or 1 and 2, so every warp's M Delta has the same k-steps). GDN
# timing table of the last commit (6276834, gthead) and this build alternating; the GDN tests and
# racecheck; pfprof 4K; prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
xz -dc $C/gthead.xz > /tmp/gthead && chmod +x /tmp/gthead
gdn_tables head /tmp/gthead new $B/lily-gpu-test
LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
wait $SP; el synth
pf_prof 8
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
