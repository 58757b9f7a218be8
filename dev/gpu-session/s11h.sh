#!/usr/bin/env bash
# s11h.sh (device, ~30 s; eleventh session, after the review mend): the CUDA single steps share
# step_begin, and the top-k step reads its k candidates into a local array (h_log holds V floats,
# which can be fewer than 2k + 1). e2e (greedy, top-k and sampling steps) and the top-k kernels.
. .carry/common.sh
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|step" $L/e2e.txt | cut -c1-200
LILY_GPU_KERNELS=topk timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/k.txt 2>&1; el "kernels topk rc=$?"; grep -E "FAIL|passed" $L/k.txt
