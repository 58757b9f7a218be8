#!/usr/bin/env bash
# s30e.sh (device, ~2.5 min): gemv2 loading each warp's share of its first tile into registers before the wait
# (LILY_CUDA_GV2_REGPRE): the kernel tests (bitwise against the plain launch; timing lines), the chain rows of
# the router, GDN in_proj / out_proj and lm_head, decode at 4K and 32K with LILY_CUDA_GV2_REGPRE 0 / 1 alternating
# (three pairs), then e2e and the HF fixtures.
# Ran on branch exp-gv-regpre (LILY_CUDA_GV2_REGPRE is not on main: decode -3 %).
. .carry/common.sh; safe_start 400
synth_bg
kernels_grep "registers before|counter \(twice\): DIFF|timing rows=(12352|8192|248320|2048 cols=4096)"
for c in router "GDN in_proj" "GDN out_proj" lm_head; do
    LILY_CHAIN="$c" timeout 60 $B/lily-gpu-test chain > "$L/chain_$c.txt" 2>&1; el "chain $c rc=$?"
    grep -E "^\|" "$L/chain_$c.txt" | grep -v "^|---" | grep -vE "loop prologue|first GEMV|bulk|without" | cut -c1-160
done
wait $SP; el synth
AB_A=0 AB_B=1 AB_PAIRS=3 DEC_AB=4K,32K dec_ab LILY_CUDA_GV2_REGPRE
e2e_fix
grep -E "registers|counter" $L/e2e.txt | cut -c1-200
safe_end
