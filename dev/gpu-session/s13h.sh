#!/usr/bin/env bash
# s13h.sh (device, ~1 min; thirteenth session, call 10): the review mend (the sampler keeps its bias
# sorted by id; the edit kernel takes each id's run of entries, no host sort per token): kernel tests,
# e2e (the top-k step with a repeated bias id against the host's edits, bitwise), HF fixtures.
. .carry/common.sh; safe_start 200
ab_checks
grep -E "edits" $L/e2e.txt | cut -c1-200
safe_end
