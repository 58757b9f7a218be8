#!/usr/bin/env bash
# s19a.sh (device, ~7 min; nineteenth session, call 1; ran on a build with LILY_CUDA_L2PF, since removed). Decode: is the step bound by reading weights
# from DRAM, or by its chain whatever the source?
#   1. LILY_CUDA_DEV_ALIAS=1 / 3: every layer reads the first layer of its kind's dense weights (1) and
#      experts too (3), so they stay in L2 over the step (wrong logits; a bound, not a path);
#   2. LILY_CUDA_L2PF=1 / 2 / 3: the dense weights requested into L2 ahead of their kernels by a side
#      stream (l2pf.cu), which a real step could do;
#   3. moe_fused's reduction after its grid barrier with its loads issued together (bitwise the same).
# Checks first: the MoE kernel tests, e2e, fixtures; the full-size decode logits of main (lily_old) and
# this build with L2PF off and on, bitwise.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
LILY_GPU_KERNELS=moe timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "moe kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200
e2e_fix
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/lg0.f32 > $L/lg0.txt 2>&1; el "old logits rc=$?"
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/lg1.f32 > $L/lg1.txt 2>&1; el "new logits rc=$?"
LILY_CUDA_L2PF=3 timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/lg2.f32 > $L/lg2.txt 2>&1; el "new L2PF=3 logits rc=$?"
cmp /tmp/lg0.f32 /tmp/lg1.f32 && echo "decode logits: new == old bitwise"; cmp /tmp/lg1.f32 /tmp/lg2.f32 && echo "decode logits: L2PF=3 == off bitwise"
A="--model /tmp/big --backend cuda --no-plot --prefill none --decode 4K --reps 3 --warmup 1"
run() { local tag=$1; shift; env "$@" timeout 60 ${BIN:-$B/lily} bench $A --out $L/b_$tag 2>&1 | grep -E "^decode " | sed "s/^/$tag /"; }
BIN=/tmp/lily_old run old X=0
run new X=0
run alias1 LILY_CUDA_DEV_ALIAS=1
run alias3 LILY_CUDA_DEV_ALIAS=3
run l2pf1 LILY_CUDA_L2PF=1
run l2pf2 LILY_CUDA_L2PF=2
run l2pf3 LILY_CUDA_L2PF=3
BIN=/tmp/lily_old run old X=0
run new X=0
run l2pf1p LILY_CUDA_L2PF=1 LILY_CUDA_L2PF_PACE=500
run l2pf3 LILY_CUDA_L2PF=3
el bench
safe_end
