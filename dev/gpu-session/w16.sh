#!/usr/bin/env bash
# w16.sh (device, ~4 min): the chunked GDN's phase B on 16 warps (LILY_CUDA_GDN_SCAN_W16). Prefill tests
# (every chunked case on both warp counts, bitwise; the timing table), e2e with it on, full-size prefill
# logits of a 300-token prompt from the session's base and from this build with it off and on (cmp),
# then prefill 4K / 32K with it off and on, alternating.
. .carry/common.sh; synth_bg; safe_start 290; ab_old
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -E "phase B on" $L/prefill.txt | grep -E "^\| chunked" | head -12
LILY_CUDA_GDN_SCAN_W16=1 timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e W16=1 rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-200
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
for v in 0 1; do LILY_CUDA_GDN_SCAN_W16=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits W16=$v rc=$?"
  cmp /tmp/lg_old.f32 /tmp/lg_$v.f32 && echo "full-size prefill logits (300 tokens), W16=$v: bitwise equal to the session's base"; done
env_ab LILY_CUDA_GDN_SCAN_W16 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,32K
safe_end
