#!/usr/bin/env bash
# side2.sh (device, ~6 min): the MoE tails' launches on a second side stream (LILY_CUDA_PF_SIDE=1; 2 =
# the side stream without it). Prefill tests (every MoE case with a shared expert or tails runs again
# on side streams, bitwise), e2e (modes 0-2 bitwise), fixtures, cli_prefill, memcheck; then `lily
# bench` prefill at 512..32K: PF_SIDE 0 / 1 / 2 and 1 with LILY_CUDA_MOE_TAILS=0, twice.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks
pf_cli
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP; el synth
for i in 1 2; do for v in 0 1 2 T; do
    if [ $v = T ]; then e="LILY_CUDA_PF_SIDE=1 LILY_CUDA_MOE_TAILS=0"; else e="LILY_CUDA_PF_SIDE=$v"; fi
    env $e timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none \
        --prefill 512,2K,4K,8K,32K --out $L/side$v 2>&1 | grep -E "^prefill " | sed "s/^/SIDE=$v /"
done; done; el bench
safe_end
