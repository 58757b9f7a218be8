#!/usr/bin/env bash
# s24d.sh (device, ~6 min): qgemm_rw.cu's gate|up gathering its own rows (LILY_CUDA_QG_RW bit 8: no gather
# pass) and the dense calls too narrow for the wide rule (bit 16): the MoE tests (moerw, with 10), memcheck
# and racecheck of their small cases, e2e and the fixtures; the full-size logits of 3, 11, 27; prefill
# 512 / 4K / 32K with 3, 11, 27 alternating; the closing sweep with the fastest at 4K.
. .carry/common.sh; safe_start 560; export LILY_COMMIT=${LILY_COMMIT:-unknown}
synth_bg
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; rc=$?; el "moerw tests rc=$rc"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-300 | head -8
if [ $rc -ne 0 ]; then el "moerw failed: stop"; safe_end; exit 0; fi
LILY_GPU_PF=moerw timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck moerw rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc.txt | tail -2
LILY_GPU_PF=moerw timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck moerw rc=$?"; grep -E "passed|RACECHECK SUMMARY" $L/rc.txt | tail -2
e2e_fix
grep -E "register operand" $L/e2e.txt | cut -c1-300
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 3 11 27; do LILY_CUDA_QG_RW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits rw=$v rc=$?"; done
for v in 11 27; do if cmp -s /tmp/lg3.f32 /tmp/lg$v.f32; then echo "full-size prefill logits (300 tokens): rw=$v bitwise equal to rw=3"
else python3 $C/cmp_logits.py /tmp/lg3.f32 /tmp/lg$v.f32 248320; fi; done
for i in 1 2; do for v in 3 11 27; do
    LILY_CUDA_QG_RW=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 512,4K,32K --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/rw=$v /" | tee -a $L/ab.txt
done; done; el bench
best=$(python3 -c "
import collections; d=collections.defaultdict(list)
for l in open('$L/ab.txt'):
    f=l.split()
    if f[2]=='4096': d[f[0]].append(float(f[3]))
print(max(d, key=lambda k: sum(d[k])/len(d[k])).split('=')[1])")
el "best at 4K: rw=$best"
LILY_CUDA_QG_RW=$best timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,4K,32K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
LILY_CUDA_QG_RW=$best timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -14
safe_end
