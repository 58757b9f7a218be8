#!/usr/bin/env bash
# s24c.sh (device, ~4 min): qgemm_rw.cu on the MoE gate|up by default (LILY_CUDA_QG_RW 3): the MoE tests on
# it (LILY_GPU_PF=moerw), memcheck and racecheck of its small cases, the dense GEMM tests, the tokens-as-N
# down projection's MoE passes (moegt: the routing's new map beside the others), e2e (its new case) and the
# HF fixtures.
. .carry/common.sh; safe_start 400
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; el "moerw tests rc=$?"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-300 | head -8
e2e_fix
grep -E "register operand" $L/e2e.txt | cut -c1-300
LILY_GPU_PF=moerw timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck moerw rc=$?"; grep -E "passed|ERROR SUMMARY" $L/mc.txt | tail -2
LILY_GPU_PF=moerw timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck moerw rc=$?"; grep -E "passed|RACECHECK SUMMARY" $L/rc.txt | tail -2
LILY_GPU_PF=qgemm timeout 100 $B/lily-gpu-test prefill 7 > $L/qgemm.txt 2>&1; el "qgemm tests rc=$?"; grep -E "FAIL|passed" $L/qgemm.txt | head -3
LILY_GPU_PF=moegt timeout 150 $B/lily-gpu-test prefill 7 > $L/moegt.txt 2>&1; el "moegt tests rc=$?"; grep -E "FAIL|passed" $L/moegt.txt | cut -c1-250 | head -5
safe_end
