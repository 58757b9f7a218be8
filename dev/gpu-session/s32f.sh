#!/usr/bin/env bash
# s32f.sh (device, ~4 min): s32e's fast top-k faulted (an illegal instruction: its tie-break reduction sat behind
# `cand &&`, so only some lanes ran it). Fixed: every lane runs it. Kernel tests, e2e, HF fixtures, the full-size
# decode logits with LILY_CUDA_MF_TOPK 0 / 1 (cmp), decode A/B at 4K and 32K (two pairs), memcheck of the kernel
# tests, racecheck of the moe kernel tests.
. .carry/common.sh; safe_start 330
synth_bg
kernels_grep "router top-k|^FAIL"
e2e_fix
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
for v in 0 1; do LILY_CUDA_MF_TOPK=$v timeout 90 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/tk$v.f32 > $L/tk$v.txt 2>&1; el "logits mf_topk=$v rc=$?"; done
cmp /tmp/tk0.f32 /tmp/tk1.f32 && echo "full-size decode logits (24 steps): mf_topk on == off, bitwise"
AB_A=0 AB_B=1 AB_PAIRS=2 DEC_AB=4K,32K dec_ab LILY_CUDA_MF_TOPK
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 13 > $L/mc_k.txt 2>&1; el "memcheck kernels rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc_k.txt
LILY_GPU_KERNELS=moe timeout 80 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 14 > $L/rc_moe.txt 2>&1; el "racecheck kernels moe rc=$?"
grep -cE "^PASS" $L/rc_moe.txt; grep -E "passed|RACECHECK SUMMARY|azard" $L/rc_moe.txt | sort | uniq -c | head -4
safe_end
