#!/usr/bin/env bash
# s39d.sh (device, ~3.5 min; thirty-ninth session, not run: the session's device time ran out): the e2e sampling test
# at LILY_GPU_SAMPLE_N=300 with its floor of 3 draws, seeds 19..24 (s39c.sh: five of six failed with the old floor),
# then memcheck of e2e `base`, `moe` and `sample` (N=300), 170 s each. Carry: prep.sh after make.
. .carry/common.sh; export SAN_LIMIT=170; safe_start 200
for s in 19 20 21 22 23 24; do
    LILY_GPU_E2E=sample LILY_GPU_SAMPLE_N=300 timeout 60 $B/lily-gpu-test e2e $s > $L/sample300_$s.txt 2>&1
    echo "N=300 seed $s rc=$?: $(grep -E '^(PASS|FAIL).*T=' $L/sample300_$s.txt | cut -c70-150 | tr '\n' '|')"
done
for g in base moe; do san_bg memcheck $L/memcheck_$g.txt e2e 19 LILY_GPU_E2E=$g; done
san_bg memcheck $L/memcheck_sample.txt e2e 19 LILY_GPU_E2E=sample LILY_GPU_SAMPLE_N=300
san_wait
for g in base moe sample; do san_report $L/memcheck_$g.txt "memcheck $g"; done
safe_end
