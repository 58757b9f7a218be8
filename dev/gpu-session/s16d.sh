#!/usr/bin/env bash
# s16d.sh (device, ~7 min; sixteenth session, fourth call): main a0c1fe6 (the MoE down projection on the
# persistent kernel by default): e2e and the HF fixtures with the defaults, memcheck and racecheck of the
# small prefill tests (their MoE cases run the new kernel), the full-size logits of a 300-token prompt
# on 128-row MoE tiles (LILY_CUDA_QG_TILE=128, so the merged map and the new kernel are taken) with
# LILY_CUDA_QG_WSP 0 and 1, and prefill 512 / 4K / 32K with 0 and 1 alternating.
. .carry/common.sh; synth_bg; safe_start 560
e2e_fix
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; grep -E "passed|SUMMARY" $L/memcheck.txt | tail -2
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/racecheck.txt 2>&1; el "racecheck rc=$?"; grep -E "passed|SUMMARY|hazard" $L/racecheck.txt | tail -3
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 0 1; do LILY_CUDA_QG_TILE=128 LILY_CUDA_QG_WSP=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits tile 128 wsp=$v rc=$?"; done
if cmp -s /tmp/lg_0.f32 /tmp/lg_1.f32; then echo "full-size logits on 128-row MoE tiles: wsp 1 bitwise equal to 0"; else python3 $C/cmp_logits.py /tmp/lg_0.f32 /tmp/lg_1.f32 248320; fi
env_ab LILY_CUDA_QG_WSP --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
