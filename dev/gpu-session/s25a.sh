#!/usr/bin/env bash
# s25a.sh (device, ~6 min): main 8e4b77d's first run on the GPU (the MoE tests on qgemm_rw.cu with the new
# K = 1024 case, the dense GEMM tests, e2e and the HF fixtures), then branch s24-fold's build (carried as
# .carry/fold.tar.xz): its MoE tests with folded cases at K = 256 and K = 2048 (the rings wrap), each run
# under a timeout; the folded kernel's SASS; the 4K bench with LILY_CUDA_QG_RW 3 / 35 (and 35 without the
# side stream) when the tests pass.
. .carry/common.sh; safe_start 540
synth_bg
F=/tmp/f; mkdir -p $F; tar xJf $C/fold.tar.xz -C $F
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; el "main moerw tests rc=$?"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-300 | head -6
LILY_GPU_PF=qgemm timeout 100 $B/lily-gpu-test prefill $(date +%s) > $L/qgemm.txt 2>&1; el "main qgemm tests rc=$?"; grep -E "FAIL|passed" $L/qgemm.txt | head -3
e2e_fix
which cuobjdump && for k in 'Lb1ELi144E' 'Lb1ELi128E'; do
  fn=$(cuobjdump -symbols $F/lily-gpu-test 2>/dev/null | grep -o "_Z15qgemm_rw_kernelI${k}[A-Za-z0-9_]*" | head -1)
  cuobjdump -sass -fun "$fn" $F/lily-gpu-test > $OUT/rw_${k}.sass 2>&1; el "sass $fn $(wc -l < $OUT/rw_${k}.sass)"
done
LILY_GPU_PF=moerw timeout 150 $F/lily-gpu-test prefill $(date +%s) > $L/fold_moerw.txt 2>&1; frc=$?; el "fold moerw tests rc=$frc"
grep -E "FAIL|passed|launches|same MoE" $L/fold_moerw.txt | cut -c1-300 | head -12; tail -3 $L/fold_moerw.txt | cut -c1-300
wait $SP; el synth
if [ $frc -eq 0 ]; then
  for v in 3 35 3 35; do
    LILY_CUDA_QG_RW=$v timeout 80 $F/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"; el "rc=$?"
  done
fi
LILY_CUDA_PF_SIDE=0 LILY_CUDA_QG_RW=35 timeout 80 $F/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K --out $L/bside 2>&1 | grep -E "^prefill " | sed "s/^/side0 rw=35 /"; el "rc=$?"
safe_end
