#!/usr/bin/env bash
# s22d.sh (device, ~1 min; ran on branch s22d, 503bd31, not on main): how much the gate|up's 192-row tiles would gain if a cluster of
# two column blocks shared each X box by multicast: LILY_QG_XHALF=1 makes each block copy only half the
# boxes (alternating with the column index; timing only, the results are wrong). MoE block and prefill 4K.
. .carry/common.sh; synth_bg; safe_start 200
moe() { env "$@" LILY_CUDA_QG_GT=1 LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_QG_XHALF=0; moe LILY_QG_XHALF=1; done; el moe
wait $SP; el synth
for i in 1 2; do for x in 0 1; do LILY_QG_XHALF=$x timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/xhalf=$x /"; done; done; el bench
safe_end
