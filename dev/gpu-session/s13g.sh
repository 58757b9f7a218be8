#!/usr/bin/env bash
# s13g.sh (device, ~1 min; thirteenth session, call 9): the final main (484eda0: attn_decode's
# tensor-core branch as a block, a static_assert): kernel tests, e2e, HF fixtures.
. .carry/common.sh; safe_start 200
ab_checks
safe_end
