#!/usr/bin/env bash
# s30c.sh (device, ~1 min): where a decode GEMV's time goes now: the `make TRACE=1` build's chain rows (median
# block: entry -> wait -> x prepared (point 5) -> x split ("staged") -> first tile computed (8) -> its sums met
# (9) -> loop end -> exit) for the router, GDN in_proj and out_proj, lm_head, and the routed experts.
. .carry/common.sh; safe_start 200
T=/tmp/bt; mkdir -p $T; tar xJf $C/bin-trace.tar.xz -C $T
for c in router "GDN in_proj" "GDN out_proj" lm_head experts; do
    LILY_CHAIN="$c" timeout 60 $T/lily-gpu-test chain > "$L/tchain_$c.txt" 2>&1; el "trace chain $c rc=$?"
    grep -E "^\||trace" "$L/tchain_$c.txt" | grep -v "^|---" | grep -vE "clusters|ahead|bulk|loop prologue|first GEMV" | cut -c1-400
done
safe_end
