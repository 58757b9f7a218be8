#!/usr/bin/env bash
# s25b.sh (device, ~6 min): branch s24-fold with the fix for s25a.sh's hang (its build carried as
# .carry/fold.tar.xz): the folded kernel (NX 144) had lost its scale-slot release (sempty arrive) at the
# front end (an unbraced `else #pragma unroll for` after `if constexpr`), so a producer that wrapped the
# scale ring (K >= 1024) waited forever. Its MoE tests (with the K = 1024 and K = 2048 cases), racecheck of
# the small set, logits at 4096 tokens with LILY_CUDA_QG_RW 3 and 35 compared bytewise, the 4K bench with
# 3 / 35 alternating.
. .carry/common.sh; safe_start 540
synth_bg
F=/tmp/f; mkdir -p $F; tar xJf $C/fold.tar.xz -C $F
LILY_GPU_PF=moerw timeout 150 $F/lily-gpu-test prefill $(date +%s) > $L/fold_moerw.txt 2>&1; frc=$?; el "fold moerw tests rc=$frc"
grep -E "FAIL|passed|launches" $L/fold_moerw.txt | cut -c1-300 | head -12; grep -E "T=1100" $L/fold_moerw.txt | cut -c1-200 | head -8
LILY_GPU_PF=moerw timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $F/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck moerw small rc=$?"; tail -1 $L/rc.txt
wait $SP; el synth
if [ $frc -eq 0 ]; then
  ids=$(seq -s, 11 4106)
  for v in 3 35; do LILY_CUDA_QG_RW=$v timeout 100 $F/lily logits --model /tmp/big --ids $ids --step 4096 --backend cuda --out /tmp/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits rw=$v rc=$?"; done
  cmp /tmp/lg3.f32 /tmp/lg35.f32 && el "logits 4096 tokens: bytewise equal" || el "logits differ"; ls -la /tmp/lg3.f32
  for v in 3 35 3 35; do
    LILY_CUDA_QG_RW=$v timeout 80 $F/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"; el "rc=$?"
  done
fi
safe_end
