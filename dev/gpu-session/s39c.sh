#!/usr/bin/env bash
# s39c.sh (device, ~3 min; thirty-ninth session): the landed build's decode sweep (256 / 4K / 32K / 128K) for
# PERF.md's table, and the e2e sampling test without the sanitizer: LILY_GPU_SAMPLE_N=300 at seeds 19..24 (s39s.sh
# saw seed 19 fail at 1.31 of its bound under both tools), and N=3000 (the default) at seed 19.
. .carry/common.sh; safe_start 300
synth_bg
for s in 19 20 21 22 23 24; do
    LILY_GPU_E2E=sample LILY_GPU_SAMPLE_N=300 timeout 60 $B/lily-gpu-test e2e $s > $L/sample300_$s.txt 2>&1
    echo "N=300 seed $s rc=$?: $(grep -E '^(PASS|FAIL).*T=0.5' $L/sample300_$s.txt | cut -c1-190)"
done
LILY_GPU_E2E=sample timeout 60 $B/lily-gpu-test e2e 19 > $L/sample3000_19.txt 2>&1
echo "N=3000 seed 19 rc=$?: $(grep -E '^(PASS|FAIL).*T=0.5' $L/sample3000_19.txt | cut -c1-190)"
wait $SP; el synth
timeout 240 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 2 --warmup 1 \
    --decode 256,4K,32K,128K --out $L/sweep 2>&1 | grep -E "^decode |ceiling" ; el sweep
safe_end
