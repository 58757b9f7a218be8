#!/usr/bin/env bash
# s14h.sh (device, ~5 min; fourteenth session, eighth call). The warp-specialised wide tile with its scale
# words in registers (16-byte quads from global memory, no per-stage 4-byte cp.async: 32 shared
# wavefronts a warp each) and lane pairs reading one column's codes (contiguous 16-byte loads): qgone
# against the base and qgemm_wg.cu's tile, sanitizers of one small call, prefill tests, full-size
# logits bitwise against the base, prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 330; ab_old
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
timeout 20 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/q0.txt 2>&1; rc=$?; el "qgone small wsw rc=$rc"; tail -1 $L/q0.txt
if [ $rc -ne 0 ]; then safe_end; exit 1; fi
for s in "4096 8192 2048" "4096 12352 2048" "4096 2048 4096"; do
  timeout 20 /tmp/gt_old qgone $s 128 5 2>&1 | grep qgone | sed 's/^/base /'
  for w in 5 8 8; do timeout 20 $B/lily-gpu-test qgone $s 128 $w 2>&1 | grep qgone | sed 's/^/new  /'; done
done; el qgone
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/mc.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/mc.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/rc.txt 2>&1; el "racecheck rc=$?"; tail -1 $L/rc.txt
timeout 200 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "warp-specialised).*bitwise equal; swapped.*wide tile: bitwise equal" $L/prefill.txt
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_1.f32 > $L/lg1.txt 2>&1; el "logits rc=$?"
cmp /tmp/lg_old.f32 /tmp/lg_1.f32 && echo "full-size logits: bitwise equal to the base"
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 4K,32K --decode none"
for i in 1 2; do
  timeout 60 /tmp/lily_old bench $P --out $L/old$i 2>&1 | grep -E "^prefill " | sed "s/^/base /"
  timeout 60 $B/lily bench $P --out $L/n$i 2>&1 | grep -E "^prefill " | sed "s/^/new  /"
done; el bench
safe_end
