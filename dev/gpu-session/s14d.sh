#!/usr/bin/env bash
# s14d.sh (device, ~6 min; fourteenth session, fourth call). qgemm_wg.cu's dequantisation loads every
# item's words before its shared stores (and the warp-specialised producer the same): qgone of the
# base's WG 5 against this build's WG 5 / WG 8; prefill tests; full-size logits bitwise against the
# base; prefill of the base and this build alternating; pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
timeout 20 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/q0.txt 2>&1; rc=$?; el "qgone small wsw rc=$rc"; tail -1 $L/q0.txt
if [ $rc -ne 0 ]; then safe_end; exit 1; fi
for s in "4096 8192 2048" "4096 12352 2048" "4096 2048 4096" "4096 1024 2048"; do
  for i in 1 2; do
    timeout 20 /tmp/gt_old qgone $s 128 5 2>&1 | grep qgone | sed 's/^/base /'
    for w in 5 8; do timeout 20 $B/lily-gpu-test qgone $s 128 $w 2>&1 | grep qgone | sed 's/^/new  /'; done
  done
done; el qgone
timeout 240 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "warp-specialised).*bitwise equal; swapped.*wide tile: bitwise equal" $L/prefill.txt
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
for v in 0 1; do LILY_CUDA_QG_WSW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits wsw=$v rc=$?"; done
cmp /tmp/lg_old.f32 /tmp/lg_0.f32 && echo "default: bitwise equal to the base"; cmp /tmp/lg_0.f32 /tmp/lg_1.f32 && echo "wsw=1: bitwise equal to wsw=0"
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none"
for i in 1 2; do
  timeout 100 /tmp/lily_old bench $P --out $L/old$i 2>&1 | grep -E "^prefill " | sed "s/^/base  /"
  timeout 100 $B/lily bench $P --out $L/n$i 2>&1 | grep -E "^prefill " | sed "s/^/new   /"
done; el bench
pf_prof 40
safe_end
