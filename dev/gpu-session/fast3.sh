#!/usr/bin/env bash
# fast3.sh (device, ~2.5 min): the residual of GV_RESID rows (gemv2) and of moe_fused's sums
# requested right after the wait. All kernel tests, e2e, HF fixtures; decode 4K/32K alternating the
# previous build (.carry/lily_old.xz) and this one.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
ab_checks
wait $SP
ab_bench 60 --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1 --decode 4K,32K
safe_end
