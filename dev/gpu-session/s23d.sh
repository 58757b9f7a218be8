#!/usr/bin/env bash
# s23d.sh (device, ~9 min; twenty-third session, the closing call): main with phase B on the warpgroup
# MMA by default (gdn_scan_wg.cu): the GDN tests with racecheck and memcheck of their small cases (one of
# 3 chunks on the new kernel), the whole prefill suite, e2e, the fixtures, then the closing prefill sweep.
. .carry/common.sh; synth_bg; safe_start 575; export LILY_COMMIT=${LILY_COMMIT:-unknown}
gdn_checks
pf_checks
wait $SP; el synth
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
safe_end
