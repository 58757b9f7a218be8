#!/usr/bin/env bash
# s21g.sh (device, ~3 min; twenty-first session, call 7, the closing one): the session's final code (the
# one-barrier loop of s21f reverted: qgemm_wg.cu as in s21a..e). qgemm_gt's MoE cases (8 passes), e2e and
# the fixtures with the defaults, the closing sweep 256 .. 128K and the 4K breakdown.
. .carry/common.sh; synth_bg; safe_start 420; export LILY_COMMIT=${LILY_COMMIT:-unknown}
LILY_GPU_PF=moegt timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
e2e_fix
wait $SP; el synth
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
pf_prof 24
safe_end
