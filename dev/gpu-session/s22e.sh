#!/usr/bin/env bash
# s22e.sh (device, ~1 min; ran on branch s22d, 66db3f9, not on main): the gate|up's 192-row tiles requesting their weight codes N stages
# ahead into L2 (LILY_QG_CPF=N; a hint, the results are the same). MoE block and prefill 4K, alternating.
. .carry/common.sh; synth_bg; safe_start 200
moe() { env "$@" LILY_CUDA_QG_GT=1 LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_QG_CPF=0; moe LILY_QG_CPF=3; moe LILY_QG_CPF=8; done; el moe
wait $SP; el synth
for i in 1 2; do for x in 0 3 8; do LILY_QG_CPF=$x timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 4K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/cpf=$x /"; done; done; el bench
safe_end
