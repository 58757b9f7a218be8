#!/usr/bin/env bash
# s29j.sh [VAR A B] (device, ~1 min): decode at 4K and 32K with VAR=A / VAR=B alternating, three pairs (default
# LILY_CUDA_MOE_ACC 0 / 1; the twenty-ninth session also ran it as `s29j.sh LILY_CUDA_GEMV2_BPS 3 2`).
. .carry/common.sh; safe_start 150
synth_bg; wait $SP; el synth
AB_A=${2:-0} AB_B=${3:-1} AB_PAIRS=3 DEC_AB=4K,32K dec_ab ${1:-LILY_CUDA_MOE_ACC}
safe_end
