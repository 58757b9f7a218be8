#!/usr/bin/env bash
# s31c.sh (device, ~7 min; branch attn-qk): moe_fused's down slice from a slice-major copy built at load
# (LILY_CUDA_MOE_DSL, default 1) and the fresh state's token zeroed (s31b's fault: embed_kernel read the
# unset d_tok of the profiled step's new state). Kernel tests, e2e, fixtures, memcheck of the MoE kernel tests
# and of the moe and attn256 e2e groups; the full-size checkpoint's decode logits with the copy on and off
# (cmp); decode A/B of LILY_CUDA_MOE_DSL and of LILY_CUDA_ATTN_QK (with the copy) at 4K and 32K, three pairs
# each; the sweep with both on.
. .carry/common.sh; safe_start 560
synth_bg
kernels_grep "moe fused H|attn qk fused hq=16 hkv=2 D=256 rope=64 len=4097|^FAIL"
e2e_fix
grep -E "attn_qk|moe_dsl" $L/e2e.txt | cut -c1-300
LILY_GPU_KERNELS=moe timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 9 > $L/mc_moe.txt 2>&1; el "memcheck moe kernels rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc_moe.txt
for g in moe attn256; do
  LILY_GPU_E2E=$g timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 9 > $L/mc_$g.txt 2>&1; el "memcheck e2e $g rc=$?"; grep -E "FAIL|ERROR SUMMARY" $L/mc_$g.txt | cut -c1-200
done
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
for v in 0 1; do LILY_CUDA_MOE_DSL=$v timeout 90 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/dsl$v.f32 > $L/dsl$v.txt 2>&1; el "logits dsl=$v rc=$?"; done
cmp /tmp/dsl0.f32 /tmp/dsl1.f32 && echo "full-size decode logits (24 steps): moe_dsl on == off, bitwise"
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_MOE_DSL
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_ATTN_QK
LILY_CUDA_ATTN_QK=1 timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode|ceiling|copy" $L/sweep.txt | head
safe_end
