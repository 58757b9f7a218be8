#!/usr/bin/env bash
# s24a.sh (device, ~8 min): qgemm_rw.cu's first run. The dense GEMM tests (LILY_GPU_PF=qgemm, pass 9 on
# the new kernel), memcheck and racecheck of pass 9, qgone TFLOP/s of the wide tile's dense shapes on
# qgemm_wsw.cu (WG 8) and qgemm_rw.cu (WG 9), alternating; the full-size prefill logits with the switch
# off and on; prefill 512 / 4K / 32K with LILY_CUDA_QG_RW 0, 1, 0, 1; e2e and the HF fixtures with it on.
. .carry/common.sh; safe_start 560
synth_bg
LILY_GPU_PF=qgemm timeout 120 $B/lily-gpu-test prefill 5 > $L/qgemm.txt 2>&1; rc=$?; el "qgemm tests rc=$rc"
grep -E "FAIL|passed" $L/qgemm.txt | cut -c1-300 | head -20; grep -E "register operand" $L/qgemm.txt | cut -c1-330
# The rest only when every pass-9 case passed (a hang there would eat the call in timeouts).
if [ $rc -ne 0 ] || grep "register operand" $L/qgemm.txt | grep -q FAIL; then el "rw failed: stop"; safe_end; exit 0; fi
if true; then
    for s in "4096 8192 2048" "4096 4096 2048" "4096 2048 4096" "4096 12352 2048" "4096 1024 2048"; do
        for w in 8 9 8 9; do timeout 30 $B/lily-gpu-test qgone $s 128 $w 2>&1 | grep -E "qgone" ; done
    done; el qgone
fi
LILY_GPU_PF=qgemm LILY_GPU_QG_PASS=9 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 > $L/mc.txt 2>&1; el "memcheck rw rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc.txt | tail -2
LILY_GPU_PF=qgemm LILY_GPU_QG_PASS=9 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 > $L/rc.txt 2>&1; el "racecheck rw rc=$?"; grep -E "passed|RACECHECK SUMMARY|hazard" $L/rc.txt | tail -2
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg0.f32 > $L/lg0.txt 2>&1; el "logits rw=0 rc=$?"
LILY_CUDA_QG_RW=1 timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg1.f32 > $L/lg1.txt 2>&1; el "logits rw=1 rc=$?"
if cmp -s /tmp/lg0.f32 /tmp/lg1.f32; then echo "full-size prefill logits (300 tokens): rw bitwise equal to wsw"
else python3 $C/cmp_logits.py /tmp/lg0.f32 /tmp/lg1.f32 248320; fi
env_ab LILY_CUDA_QG_RW --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 512,4K,32K
LILY_CUDA_QG_RW=1 e2e_fix
safe_end
