#!/usr/bin/env bash
# s24b.sh (device, ~7 min): qgemm_rw.cu on the MoE's grouped GEMMs (LILY_CUDA_QG_RW bits 2 gate|up, 4 down).
# The dense GEMM tests and the MoE tests on it (LILY_GPU_PF=qgemm, moerw), e2e and the HF fixtures (the
# engine's default, with the new e2e case), the MoE block at 4096 tokens with LILY_CUDA_QG_RW 0 / 2 / 6,
# the full-size logits with 1 / 3 / 7, prefill 512 / 4K / 32K with 1, 3, 7 alternating, pfprof 4K with 3.
. .carry/common.sh; safe_start 560
synth_bg
LILY_GPU_PF=qgemm timeout 120 $B/lily-gpu-test prefill 5 > $L/qgemm.txt 2>&1; el "qgemm tests rc=$?"; grep -E "FAIL|passed" $L/qgemm.txt | cut -c1-300 | head -5
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill 5 > $L/moerw.txt 2>&1; rc=$?; el "moerw tests rc=$rc"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-400 | head -12
if [ $rc -ne 0 ] && ! grep -q passed $L/moerw.txt; then el "moerw failed: stop"; safe_end; exit 0; fi
e2e_fix
for v in 0 2 6 2 6; do LILY_CUDA_QG_RW=$v LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 > $L/moe$v.txt 2>&1; echo "rw=$v $(grep -E "^\| MoE \|" $L/moe$v.txt | tail -2 | tr "\n" " ")"; done; el moe
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 1 3 7; do LILY_CUDA_QG_RW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits rw=$v rc=$?"; done
for v in 3 7; do if cmp -s /tmp/lg1.f32 /tmp/lg$v.f32; then echo "full-size prefill logits (300 tokens): rw=$v bitwise equal to rw=1"
else python3 $C/cmp_logits.py /tmp/lg1.f32 /tmp/lg$v.f32 248320; fi; done
for i in 1 2; do for v in 1 3 7; do
    LILY_CUDA_QG_RW=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 512,4K,32K --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"
done; done; el bench
LILY_CUDA_QG_RW=3 timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -24
safe_end
