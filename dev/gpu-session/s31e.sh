#!/usr/bin/env bash
# s31e.sh (device, ~4 min; main a92455f): e2e and the HF fixtures of the final build (the slice-major copies now
# kept to an eighth of the GPU's memory free), then racecheck of the attention kernel tests (test_attn and
# test_attn_qk: attn_tc with the q/k prologue and the producer-made row; s31d's racecheck of the attn256 e2e
# group ran out of time in its prefill cases).
. .carry/common.sh; safe_start 280
e2e_fix
grep -E "moe_dsl" $L/e2e.txt | cut -c1-200
LILY_GPU_KERNELS=attn timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 17 > $L/rc_attn.txt 2>&1; el "racecheck attn kernels rc=$?"
grep -E "FAIL|passed|SUMMARY" $L/rc_attn.txt | cut -c1-200 | tail -4; echo "attn qk cases passed: $(grep -c '^PASS attn qk' $L/rc_attn.txt)"
safe_end
