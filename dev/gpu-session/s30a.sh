#!/usr/bin/env bash
# s30a.sh (device, ~9 min): the thirtieth session's first call. gemv2's input shared by thread-block clusters
# (LILY_CUDA_GV_MC): the kernel tests (which compare clusters of 2 and 4 bitwise with the plain launch, and
# time them), the chain rows of the router, GDN in_proj and out_proj with it, decode at 4K and 32K with
# LILY_CUDA_GV_MC 0 / 2 alternating, then e2e and the HF fixtures (this HEAD's first GPU run: it also
# checks the twenty-ninth session's last test-code refactors).
# Ran on branch exp-gv-mc (LILY_CUDA_GV_MC is not on main: slower, docs/PERF.md thirtieth session).
. .carry/common.sh; safe_start 575
synth_bg
kernels_grep "cluster|timing"
for c in router "GDN in_proj" "GDN out_proj"; do
    LILY_CHAIN="$c" timeout 40 $B/lily-gpu-test chain > "$L/chain_$c.txt" 2>&1; el "chain $c rc=$?"; grep -E "^\|" "$L/chain_$c.txt" | grep -v "^|---" | cut -c1-160
done
wait $SP; el synth
AB_A=0 AB_B=2 AB_PAIRS=2 DEC_AB=4K,32K dec_ab LILY_CUDA_GV_MC
e2e_fix
safe_end
