#!/usr/bin/env bash
# s31f.sh (device, ~1 min; main after the review): the kernel tests, e2e and the HF fixtures of the final build.
. .carry/common.sh; safe_start 150
kernels_grep "moe fused H=2048 I=512 E=256 top8 Is=512 group 64:|^FAIL"
e2e_fix
grep -E "moe_dsl|attn_qk" $L/e2e.txt | cut -c1-200
safe_end
