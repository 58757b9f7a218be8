#!/usr/bin/env bash
# s24e.sh (device, ~4 min): qgemm_rw.cu's balanced tiles (LILY_CUDA_QG_RW bit 32: a group's tiles of equal rows)
# and the narrow dense calls (bit 16): the MoE tests (moerw, with 34), the full-size logits of 51 against 3,
# prefill 512 / 4K / 32K with 3, 19, 35, 51 alternating.
. .carry/common.sh; safe_start 400
synth_bg
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; rc=$?; el "moerw tests rc=$rc"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-300 | head -8
if [ $rc -ne 0 ]; then el "moerw failed: stop"; safe_end; exit 0; fi
LILY_GPU_PF=moerw timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck moerw rc=$?"; grep -E "passed|RACECHECK SUMMARY" $L/rc.txt | tail -2
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 3 51; do LILY_CUDA_QG_RW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits rw=$v rc=$?"; done
if cmp -s /tmp/lg3.f32 /tmp/lg51.f32; then echo "full-size prefill logits (300 tokens): rw=51 bitwise equal to rw=3"; else python3 $C/cmp_logits.py /tmp/lg3.f32 /tmp/lg51.f32 248320; fi
for i in 1 2; do for v in 3 19 35 51; do
    LILY_CUDA_QG_RW=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 512,4K,32K --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"
done; done; el bench
safe_end
