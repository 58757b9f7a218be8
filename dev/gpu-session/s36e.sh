#!/usr/bin/env bash
# s36e.sh (device, ~9 min): the session's closing call on main with the down slice and the router's 8-bit rows on
# the integer MMA, and gdn_front (off). Kernel tests, e2e, HF fixtures; the per-kernel table of one 4K step; the
# closing decode sweep; then racecheck and memcheck of e2e's select and attn256 groups and of the gdn kernel
# tests, all at once (SAN_LIMIT 330 s each).
. .carry/common.sh; safe_start 560
synth_bg
kernels_grep "gdn front"
e2e_fix
wait $SP; el synth
timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof.txt 2>&1; el "prof rc=$?"; grep -E "^\|" $L/prof.txt
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 2 --warmup 1 --out $L/sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^decode|ceiling" $L/sweep.txt | head
cp $L/sweep*.json $OUT/ 2>/dev/null
demo_fid
export SAN_LIMIT=330
for t in racecheck memcheck; do
    for g in select attn256; do san_bg $t $L/${t}_$g.txt e2e 19 LILY_GPU_E2E=$g; done
    san_bg $t $L/${t}_gdn.txt kernels 43 LILY_GPU_KERNELS=gdn
done
san_wait
for t in racecheck memcheck; do for g in select attn256 gdn; do san_report $L/${t}_$g.txt "$t $g"; done; done
safe_end
