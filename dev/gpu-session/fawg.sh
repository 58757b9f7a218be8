#!/usr/bin/env bash
# fawg.sh (device, ~5 min): the wgmma flash attention at head_dim 256 (attn_flash_wg.cu). e2e (with the
# new D-256 prefill case), the prefill kernel tests (every D-256 attention case through both flash
# kernels, and their speed table), memcheck of the small prefill tests; then prefill 4K and 32K with
# LILY_CUDA_FA_WG=0/1 alternating, and the 4K per-phase profile with it on.
. .carry/common.sh; synth_bg; safe_start 500
timeout 120 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|head_dim 256" $L/e2e.txt | cut -c1-330
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed|wgmma\)|\| attention" $L/prefill.txt | cut -c1-260
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP
env_ab LILY_CUDA_FA_WG --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,32K
pf_prof 12
safe_end
