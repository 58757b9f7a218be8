#!/usr/bin/env bash
# combo.sh (device, ~6 min): main (8e014f0, carried as .carry/main.tar.xz: lily + lily-gpu-test) runs its
# kernel tests and e2e; the merge of gv2-lean + gdn-gnorm + gv-pf ($B) runs all kernel tests, e2e, the HF
# fixtures, the GEMV tests and e2e with LILY_CUDA_GV_PF_ALL=1 and e2e with LILY_CUDA_GDN_GNORM=0; then decode
# 4K/32K alternating main / merge (gnorm 0) / merge (gnorm 1) / merge (gnorm 1, pf_all 1), twice.
. .carry/common.sh; synth_bg; safe_start 560
mkdir -p /tmp/m && tar xJf $C/main.tar.xz -C /tmp/m
timeout 150 /tmp/m/lily-gpu-test kernels $(date +%s) > $L/main_kernels.txt 2>&1; el "main kernels rc=$?"; grep -E "FAIL|passed" $L/main_kernels.txt | cut -c1-200
timeout 90 /tmp/m/lily-gpu-test e2e $(date +%s) > $L/main_e2e.txt 2>&1; el "main e2e rc=$?"; grep -E "FAIL|passed" $L/main_e2e.txt | cut -c1-200
ab_checks
LILY_CUDA_GV_PF_ALL=1 LILY_GPU_KERNELS=gemv timeout 60 $B/lily-gpu-test kernels $(date +%s) 2>&1 | grep -E "FAIL|passed"; el "gemv kernels pf_all"
LILY_CUDA_GV_PF_ALL=1 timeout 90 $B/lily-gpu-test e2e $(date +%s) 2>&1 | grep -E "FAIL|passed"; el "e2e pf_all"
LILY_CUDA_GDN_GNORM=0 timeout 90 $B/lily-gpu-test e2e $(date +%s) 2>&1 | grep -E "FAIL|passed"; el "e2e gnorm 0"
for v in 0 1; do LILY_CUDA_GDN_GNORM=$v LILY_CHAIN="GDN out_proj" timeout 60 $B/lily-gpu-test chain 2>&1 | grep -E "^\| (GDN|gdn)" | head -4 | sed "s/^/gnorm=$v /"; done; el chain
wait $SP
A="--model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1 --decode 4K,32K"
for i in 1 2; do
  timeout 60 /tmp/m/lily bench $A --out $L/main$i 2>&1 | grep -E "^decode " | sed "s/^/main /"
  LILY_CUDA_GDN_GNORM=0 timeout 60 $B/lily bench $A --out $L/g0$i 2>&1 | grep -E "^decode " | sed "s/^/lean /"
  timeout 60 $B/lily bench $A --out $L/g1$i 2>&1 | grep -E "^decode " | sed "s/^/lean+gnorm /"
  LILY_CUDA_GV_PF_ALL=1 timeout 60 $B/lily bench $A --out $L/pf$i 2>&1 | grep -E "^decode " | sed "s/^/lean+gnorm+pf /"
done; el bench
safe_end
