#!/usr/bin/env bash
# s21h.sh (device, ~3 min; twenty-first session, call 8): two changes after the closing sweep, against it
# (.carry/lily_old.xz: the build of f04e46f). qgemm_gt.cu's X requests by 8 lanes instead of one thread (its
# 8 moegt passes; prefill old/new alternating); the MoE gate|up's 192-row tile with four stages
# (LILY_QG_WG3_NST=4; s21e's profile: its warps wait at the barrier after the next stage's tensor-map copies;
# the default and four-stage MoE passes, the MoE block and prefill with the switch 3 / 4 alternating).
. .carry/common.sh; synth_bg; safe_start 300; ab_old
LILY_GPU_PF=moegt timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
LILY_GPU_PF=moenst timeout 60 $B/lily-gpu-test prefill $(date +%s) > $L/moenst.txt 2>&1; el "moenst rc=$?"; grep -E "FAIL|passed" $L/moenst.txt | cut -c1-200 | head -5
e2e_fix
moe() { env "$@" LILY_CUDA_QG_GT=1 LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_QG_WG3_NST=3; moe LILY_QG_WG3_NST=4; done; el moe
wait $SP; el synth
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill 1K,4K,8K,32K --decode none --reps 2 --warmup 1
for i in 1 2; do for cfg in "LILY_QG_WG3_NST=3" "LILY_QG_WG3_NST=4"; do
  env $cfg timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 1K,4K,8K,32K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/$cfg /"
done; done; el bench
safe_end
