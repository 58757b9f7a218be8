#!/usr/bin/env bash
# s23d.sh (device, ~8 min; twenty-third session, the closing call; run on 9c70598, where LILY_GDN_WG_SW still
# existed: the swizzled layout is now the only one): main with phase B on the warpgroup MMA
# by default (gdn_scan_wg.cu) and its B operands in the 128-byte swizzled layout behind LILY_GDN_WG_SW
# (the shared stores conflict-free; default off here): the GDN tests with the swizzle, racecheck and
# memcheck of the small cases (one of 3 chunks) with and without it, the whole prefill suite, e2e, the
# fixtures, the swizzle's prefill A/B at 4K and its full-size logits against the default (bitwise
# expected), then the closing prefill sweep of the defaults.
. .carry/common.sh; synth_bg; safe_start 575; export LILY_COMMIT=${LILY_COMMIT:-unknown}
LILY_GDN_WG_SW=1 LILY_GPU_PF=gdn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/gdn_sw1.txt 2>&1; el "gdn tests sw=1 rc=$?"
grep -E "FAIL|passed" $L/gdn_sw1.txt | cut -c1-240 | head -6; grep -E "^\| chunked" $L/gdn_sw1.txt | grep -E "\| 4 \|"
for v in 1 0; do
    LILY_GDN_WG_SW=$v LILY_GPU_PF=gdn timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc$v.txt 2>&1; el "racecheck gdn sw=$v rc=$?"; tail -1 $L/rc$v.txt
    LILY_GDN_WG_SW=$v LILY_GPU_PF=gdn timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc$v.txt 2>&1; el "memcheck gdn sw=$v rc=$?"; tail -1 $L/mc$v.txt
done
pf_checks
grep -E "^\| chunked" $L/prefill.txt | grep -E "\| 4 \|"
wait $SP; el synth
if ! grep -q FAIL $L/gdn_sw1.txt; then
    env_ab LILY_GDN_WG_SW --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K
    ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
    for v in 0 1; do LILY_GDN_WG_SW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits sw=$v rc=$?"; done
    cmp -s /tmp/lg_0.f32 /tmp/lg_1.f32 && echo "logits bitwise equal" || python3 $C/cmp_logits.py /tmp/lg_0.f32 /tmp/lg_1.f32 248320
fi
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,4K,32K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
safe_end
