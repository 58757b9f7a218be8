#!/usr/bin/env bash
# s12a.sh (device, ~8 min; twelfth session, first call): the MoE's merged tails (LILY_CUDA_MOE_TAILS 2:
# gate|up on 192-row tiles of 3 warpgroups, 3: down as well). Prefill tests (the new passes), memcheck of
# the small prefill tests with each mode, full-size logits of each mode against mode 1 (cmp), then
# `lily bench` with the switch at 1, 2, 3 alternating, and pfprof 4K of each mode.
. .carry/common.sh; synth_bg; safe_start 560
timeout 300 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed|merged" $L/prefill.txt | cut -c1-220 | head -20
for m in 2 3; do
  LILY_CUDA_MOE_TAILS=$m timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck$m.txt 2>&1; el "memcheck tails=$m rc=$?"; tail -1 $L/memcheck$m.txt
done
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for m in 1 2 3; do
  LILY_CUDA_MOE_TAILS=$m timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg$m.f32 > $L/lg$m.txt 2>&1; el "logits tails=$m rc=$?"
done
cmp /tmp/lg1.f32 /tmp/lg2.f32 && echo "tails 2: bitwise equal to 1"; cmp /tmp/lg1.f32 /tmp/lg3.f32 && echo "tails 3: bitwise equal to 1"
for r in 1 2; do for m in 1 2 3; do
  LILY_CUDA_MOE_TAILS=$m timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,4K,8K,32K --decode none --out $L/ab_$m 2>&1 | grep -E "^prefill " | sed "s/^/tails=$m /"
done; done; el bench
for m in 1 2 3; do
  LILY_CUDA_MOE_TAILS=$m timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$m.txt 2>&1; el "pfprof tails=$m"; grep -E "plain|moe experts" $L/pfprof$m.txt
done
safe_end
