#!/usr/bin/env bash
# s33a.sh (device, ~3 min): main without the fast top-k (it went to branch exp-fast-topk: -2 %), with the
# diagnostics: kernel tests, e2e, HF fixtures. Then the gdn_out case that failed once under memcheck (s32f.sh:
# split 8, "DIFFER"; the test now names the first part that differs and its step): the gdn tests 30 times
# plain and 8 times under memcheck, each with its own seed; the failures printed whole.
. .carry/common.sh; safe_start 300
kernels_grep "^FAIL"
e2e_fix
pf=0; for s in $(seq 1 30); do LILY_GPU_KERNELS=gdn timeout 20 $B/lily-gpu-test kernels $((1000+s)) > $L/gdn_$s.txt 2>&1 || pf=$((pf+1)); done
el "gdn plain x30: runs failed $pf"; cat $L/gdn_*.txt | grep -E "^FAIL" | cut -c1-400 | sort | uniq -c | head
mf=0; for s in $(seq 1 8); do LILY_GPU_KERNELS=gdn timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels $((2000+s)) > $L/gdn_mc_$s.txt 2>&1 || mf=$((mf+1)); done
el "gdn memcheck x8: runs failed $mf"; cat $L/gdn_mc_*.txt | grep -E "^FAIL|ERROR SUMMARY" | cut -c1-400 | sort | uniq -c | head
LILY_GPU_KERNELS=gdn timeout 20 $B/lily-gpu-test kernels 13 > $L/gdn_13.txt 2>&1; el "gdn plain seed 13 rc=$?"; grep -E "^FAIL" $L/gdn_13.txt | cut -c1-400
LILY_GPU_KERNELS=gdn timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 13 > $L/gdn_mc13.txt 2>&1; el "gdn memcheck seed 13 (s32f's) rc=$?"; grep -E "^FAIL|ERROR SUMMARY" $L/gdn_mc13.txt | cut -c1-400
safe_end
