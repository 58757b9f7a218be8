#!/usr/bin/env bash
# s16a.sh (device, ~9 min; sixteenth session, first call): the persistent warp-specialised MoE GEMM
# (qgemm_wsp.cu, LILY_CUDA_QG_WSP, default 0) checked and measured, and main's default path checked on
# the same build (the closing review's mend of the fifteenth session had not run on the GPU):
# a hang check (the small prefill tests), the prefill tests (their MoE cases on the new kernel among
# them), e2e and the HF fixtures with the defaults and with LILY_CUDA_QG_WSP=3, pfprof 4K with 0 and 3,
# prefill 512 / 4K / 32K with 0 and 3 alternating, and the full-size logits of both.
. .carry/common.sh; synth_bg; safe_start 560
timeout 60 $B/lily-gpu-test prefill 5 small > $L/small.txt 2>&1; rc=$?; el "prefill small rc=$rc"; grep -E "FAIL|passed" $L/small.txt | cut -c1-200 | head
if [ $rc -ne 0 ]; then tail -5 $L/small.txt; safe_end; exit 1; fi
pf_checks
LILY_CUDA_QG_WSP=3 e2e_fix
wait $SP; el synth
for v in 0 3; do LILY_CUDA_QG_WSP=$v timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; el "pfprof wsp=$v rc=$?"; grep -E "plain|moe experts" $L/pfprof$v.txt | head -8; done
for i in 1 2; do for v in 0 3; do
  LILY_CUDA_QG_WSP=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none --out $L/ab$v$i 2>&1 | grep -E "^prefill " | sed "s/^/wsp=$v /"
done; done; el bench
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 0 3; do LILY_CUDA_QG_WSP=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits wsp=$v rc=$?"; done
if cmp -s /tmp/lg_0.f32 /tmp/lg_3.f32; then echo "full-size logits: wsp 3 bitwise equal to 0"; else python3 $C/cmp_logits.py /tmp/lg_0.f32 /tmp/lg_3.f32 248320; fi
safe_end
