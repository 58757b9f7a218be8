#!/usr/bin/env bash
# s23c.sh (device, ~6 min; branch s23-ws, da3e93c: LILY_GDN_WG_WS): gdn_scan_ws, phase B warp-specialised (LILY_GDN_WG_WS=1): the GDN tests with
# it (against the CPU and the scan), racecheck and memcheck of the small cases (one of 3 chunks), the timing
# table of both forms; then at full size the prefill A/B of the two forms and their 300-token logits
# compared (the same products in the same order: bitwise expected).
. .carry/common.sh; safe_start 560
synth_bg
for v in 1 0; do
    LILY_GDN_WG_WS=$v LILY_GPU_PF=gdn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/gdn_ws$v.txt 2>&1; el "gdn tests ws=$v rc=$?"
    grep -E "FAIL|passed" $L/gdn_ws$v.txt | cut -c1-240 | head -8; grep -E "^\| chunked" $L/gdn_ws$v.txt | grep -E "\| 4 \|"
done
LILY_GDN_WG_WS=1 LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck ws rc=$?"; tail -1 $L/rc.txt
LILY_GDN_WG_WS=1 LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/sc.txt 2>&1; el "synccheck ws rc=$?"; tail -1 $L/sc.txt
LILY_GDN_WG_WS=1 LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck ws rc=$?"; tail -1 $L/mc.txt
if ! grep -q FAIL $L/gdn_ws1.txt; then
    wait $SP; el "synth done"
    env_ab LILY_GDN_WG_WS --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,32K
    ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
    for v in 0 1; do LILY_GDN_WG_WS=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits ws=$v rc=$?"; done
    cmp -s /tmp/lg_0.f32 /tmp/lg_1.f32 && echo "logits bitwise equal" || python3 $C/cmp_logits.py /tmp/lg_0.f32 /tmp/lg_1.f32 248320
fi
safe_end
