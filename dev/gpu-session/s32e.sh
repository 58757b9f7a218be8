#!/usr/bin/env bash
# s32e.sh (device, ~9.5 min): moe_fused's top-k by router_topk_fast (LILY_CUDA_MF_TOPK, default 1; the same bits as
# router_topk). Kernel tests (the new router top-k case: 4,000 warps against router_topk), e2e, HF fixtures; the
# full-size checkpoint's 24 decode steps with it on and off (cmp); decode A/B at 4K and 32K, three pairs; then the
# sanitizers: memcheck of all kernel tests, racecheck of the kernel tests of each decode family and of the moe e2e
# group (s32d covered the e2e base group: racecheck 30 of 34 in 380 s, memcheck 34 of 34).
. .carry/common.sh; safe_start 565
synth_bg
kernels_grep "router top-k|^FAIL"
e2e_fix
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
for v in 0 1; do LILY_CUDA_MF_TOPK=$v timeout 90 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/tk$v.f32 > $L/tk$v.txt 2>&1; el "logits mf_topk=$v rc=$?"; done
cmp /tmp/tk0.f32 /tmp/tk1.f32 && echo "full-size decode logits (24 steps): mf_topk on == off, bitwise"
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_MF_TOPK
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 13 > $L/mc_k.txt 2>&1; el "memcheck kernels rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc_k.txt
for f in moe gemv gdn qk topk; do
    LILY_GPU_KERNELS=$f timeout 70 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 14 > $L/rc_$f.txt 2>&1; el "racecheck kernels $f rc=$?"
    grep -cE "^PASS" $L/rc_$f.txt; grep -E "passed|RACECHECK SUMMARY|azard" $L/rc_$f.txt | sort | uniq -c | head -4
done
LILY_GPU_E2E=moe timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test e2e 15 > $L/rc_e2e_moe.txt 2>&1; el "racecheck e2e moe rc=$?"
grep -cE "^PASS" $L/rc_e2e_moe.txt; grep -E "passed|RACECHECK SUMMARY|azard" $L/rc_e2e_moe.txt | sort | uniq -c | head -4
safe_end
