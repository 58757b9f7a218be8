#!/usr/bin/env bash
# s24g.sh (device, ~4 min): qgemm_rw.cu on the folded map (LILY_CUDA_QG_RW bit 32: a group's last 1..16 rows in
# its last full tile, up to 144 tokens a block, 240 registers a consumer): the MoE tests (moerw: 2, 34, 6, 38),
# racecheck of their small cases, the full-size logits of 35 against 3, prefill 4K / 32K with 3, 35, 3, 35.
. .carry/common.sh; safe_start 280
synth_bg
LILY_GPU_PF=moerw timeout 100 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; rc=$?; el "moerw tests rc=$rc"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-300 | head -8
if [ $rc -ne 0 ]; then el "moerw failed: stop"; safe_end; exit 0; fi
LILY_GPU_PF=moerw timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck moerw rc=$?"; grep -E "passed|RACECHECK SUMMARY" $L/rc.txt | tail -2
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 3 35; do LILY_CUDA_QG_RW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits rw=$v rc=$?"; done
if cmp -s /tmp/lg3.f32 /tmp/lg35.f32; then echo "full-size prefill logits (300 tokens): rw=35 bitwise equal to rw=3"; else python3 $C/cmp_logits.py /tmp/lg3.f32 /tmp/lg35.f32 248320; fi
for v in 3 35 3 35; do
    LILY_CUDA_QG_RW=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,32K --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /"
done; el bench
safe_end
