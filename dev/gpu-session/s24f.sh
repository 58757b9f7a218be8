#!/usr/bin/env bash
# s24f.sh (device, ~3 min): main's final build of the session (187bfcf): the dense GEMM tests, the MoE tests on
# qgemm_rw.cu, the GDN tests (the twenty-third session's mend had not run), e2e and the HF fixtures; prefill 4K.
. .carry/common.sh; safe_start 300
synth_bg
LILY_GPU_PF=qgemm timeout 100 $B/lily-gpu-test prefill $(date +%s) > $L/qgemm.txt 2>&1; el "qgemm tests rc=$?"; grep -E "FAIL|passed" $L/qgemm.txt | head -3
LILY_GPU_PF=moerw timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/moerw.txt 2>&1; el "moerw tests rc=$?"; grep -E "FAIL|passed|launches" $L/moerw.txt | cut -c1-300 | head -6
LILY_GPU_PF=gdn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/gdn.txt 2>&1; el "gdn tests rc=$?"; grep -E "FAIL|passed" $L/gdn.txt | cut -c1-240 | head -4
e2e_fix
grep -E "register operand" $L/e2e.txt | cut -c1-300
wait $SP; el synth
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K --out $L/b 2>&1 | grep -E "^prefill "
safe_end
