#!/usr/bin/env bash
# qgsm.sh (device, ~1 min; written in the seventeenth session for the next one): the first run of the
# short prompts' grouped GEMM prototype (dev/qgemm_sm/qgemm_sm.cu; prep.sh carries it as
# .carry/qgemm_sm.xz): its CPU checks and its time against the engine's qgemm_launch on the MoE
# groups of 256, 512 and 1024-token prompts. Then the MoE block's share of a 256-token prefill.
. .carry/common.sh; safe_start 200
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
for T in 256 512 1024; do timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; cat $L/qgsm_$T.txt; done
safe_end
