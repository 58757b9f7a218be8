#!/usr/bin/env bash
# s23a.sh (device, ~9 min): the twenty-third session's first call. (1) main's closing mend of the
# twenty-second session (s22f.sh: qgemm_gt's MoE passes, e2e, fixtures); (2) phase B of the chunked GDN
# on the warpgroup MMA (gdn_scan_wg.cu, LILY_CUDA_GDN_WG): its GDN tests against the CPU and the scan,
# the timing table, racecheck and memcheck of the small cases; (3) if they pass, the prefill A/B of the
# switch at full size, the full-size logits with it on and off compared, and pfprof 4K.
. .carry/common.sh; safe_start 560
synth_bg
gdn_checks; g=$?
LILY_GPU_PF=moegt timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/moegt.txt 2>&1; el "moegt rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-200 | head -5
e2e_fix
if [ $g -eq 0 ]; then
    wait $SP; el "synth done"
    env_ab LILY_CUDA_GDN_WG --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 512,4K,32K
    ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
    for v in 0 1; do LILY_CUDA_GDN_WG=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits gdn_wg=$v rc=$?"; done
    python3 $C/cmp_logits.py /tmp/lg_0.f32 /tmp/lg_1.f32 248320
    pf_prof 24
fi
safe_end
