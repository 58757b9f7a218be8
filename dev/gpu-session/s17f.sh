#!/usr/bin/env bash
# s17f.sh (device, ~4 min; seventeenth session, sixth call): the final main (split-K's measurement mode 3
# removed after it lost): the prefill tests, e2e and the HF fixtures.
. .carry/common.sh; safe_start 250
pf_checks
grep -cE "PASS qgemm split-K" $L/prefill.txt
safe_end
