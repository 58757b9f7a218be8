#!/usr/bin/env bash
# side.sh (device, ~7 min): the prefill side stream (LILY_CUDA_PF_SIDE). Prefill kernel tests (the MoE
# cases run the shared expert on a side stream too, bitwise), e2e (the side-stream case: modes 0-2
# bitwise), HF fixtures, cli_prefill, memcheck of the small prefill tests; then `lily bench` prefill at
# 512..32K with the side stream off (0), at a lower priority (1) and at the same priority (2), twice.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks
pf_cli
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP; el synth
for i in 1 2; do for v in 0 1 2; do
    LILY_CUDA_PF_SIDE=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none \
        --prefill 512,2K,4K,8K,32K --out $L/side$v 2>&1 | grep -E "^prefill " | sed "s/^/SIDE=$v /"
done; done; el bench
safe_end
