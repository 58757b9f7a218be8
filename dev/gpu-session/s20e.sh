#!/usr/bin/env bash
# s20e.sh (device, ~6 min; twentieth session, call 5, the closing one): main with qgemm_gt.cu on by default
# (groups of 48 rows and up) and the gated norm 8 values a lane. e2e and the HF fixtures with the defaults
# and with LILY_CUDA_QG_GT=2 (the kernel on every down projection it takes: the mlx-4bit fixture's);
# cli_prefill; the prefill sweep 256 .. 128K; memcheck of the small prefill tests (qgemm_gt's cases among them).
. .carry/common.sh; synth_bg; safe_start 470; export LILY_COMMIT=${LILY_COMMIT:-unknown}
e2e_fix
LILY_CUDA_QG_GT=2 e2e_fix
pf_cli
wait $SP; el synth
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
safe_end
