#!/usr/bin/env bash
# s36b.sh (device, ~8 min): a GDN layer's in_proj and step in one launch (gdn_front.cu, LILY_CUDA_GDN_FRONT, on
# by default). Kernel tests (the gdn family's lines), e2e (gdn_front group among all), HF fixtures; the 24
# full-size decode steps with it off and on (bitwise expected); the per-kernel table of one 4K step off / on;
# gdn_front_kernel and gdn_kernel by ncu; decode 4K / 32K three alternating pairs; then memcheck and racecheck
# of the gdn kernel tests and memcheck of the gdn_front e2e group.
. .carry/common.sh; safe_start 560
synth_bg
kernels_grep "gdn front|FAIL"
e2e_fix
grep -E "gdn_front" $L/e2e.txt | cut -c1-300
wait $SP; el synth
decode_logits off $B/lily LILY_CUDA_GDN_FRONT=0
decode_logits on $B/lily
cmp /tmp/l_off.f32 /tmp/l_on.f32 && echo "full-size decode logits (24 steps): front on == off, bitwise"
prof_ab LILY_CUDA_GDN_FRONT "gdn|moe|attn|lm_head|total"
ncu_envs gdn_front_kernel -
ncu_envs gdn_kernel LILY_CUDA_GDN_FRONT=0
AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GDN_FRONT
for t in memcheck racecheck; do SAN_LIMIT=150 san_bg $t $L/k_$t.txt kernels 37 LILY_GPU_KERNELS=gdn; done
SAN_LIMIT=150 san_bg memcheck $L/e_memcheck.txt e2e 41 LILY_GPU_E2E=gdn_front
san_wait
for t in memcheck racecheck; do san_report $L/k_$t.txt "$t gdn"; done
san_report $L/e_memcheck.txt "memcheck e2e gdn_front"
safe_end
