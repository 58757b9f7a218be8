#!/usr/bin/env bash
# s31d.sh (device, ~8 min; the session's final build: attn_qk and moe_dsl on by default): kernel tests, e2e, HF
# fixtures; racecheck of the moe and attn256 e2e groups (the kernels this session changed: moe_fused's slice-major
# down, attn_tc's q/k prologue and its producer-made row); the closing decode sweep with the defaults.
. .carry/common.sh; safe_start 570
synth_bg
kernels_grep "^FAIL"
e2e_fix
grep -E "attn_qk|moe_dsl" $L/e2e.txt | cut -c1-240
for g in attn256 moe; do
  LILY_GPU_E2E=$g timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 13 > $L/rc_$g.txt 2>&1; el "racecheck e2e $g rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/rc_$g.txt | cut -c1-200 | tail -3
done
wait $SP; el synth
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode|ceiling" $L/sweep.txt | head
cp $L/sweep*.json $OUT/ 2>/dev/null
safe_end
