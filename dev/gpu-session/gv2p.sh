#!/usr/bin/env bash
# gv2p.sh (device, ~8 min): the persistent prototype with the engine's GEMV (build/dev/persist_gv2,
# carried as .carry/persist_gv2.xz), then main's kernel and e2e tests and racecheck of e2e (the group
# gcsplit.sh's run_gpu.sh call ran out of time for).
. .carry/common.sh
xz -dkc $C/persist_gv2.xz > /tmp/persist_gv2 && chmod +x /tmp/persist_gv2; timeout 120 /tmp/persist_gv2 40 10 > $L/persist_gv2.txt 2>&1; el "persist_gv2 rc=$?"; cat $L/persist_gv2.txt
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|DIFFERS|passed" $L/kernels.txt | cut -c1-200
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
timeout 420 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 7 > $L/racecheck.txt 2>&1; el "racecheck e2e rc=$?"; grep -E "FAIL|passed|RACECHECK SUMMARY|hazard" $L/racecheck.txt | head
