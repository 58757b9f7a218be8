#!/usr/bin/env bash
# s16j.sh (device, ~5 min; sixteenth session, tenth call): the final main (src/ and tests/ as at 028c244,
# after the revert of the 2-warpgroup form): the prefill tests, e2e, the HF fixtures and cli_prefill.
. .carry/common.sh; safe_start 400
pf_checks
pf_cli
safe_end
