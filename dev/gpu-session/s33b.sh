#!/usr/bin/env bash
# s33b.sh (device, ~2 min): gdn_out's rare "o differs" at split 8 (s33a.sh: 1 of 30 plain runs, 1 of 8 under
# memcheck). The gdn tests 40 times with the default (EARLY) fused launch and 40 times with the fused launch in
# the plain form (LILY_GPU_GDN_OUT_LAT=0), printing where o differs (head, column, split, bits).
. .carry/common.sh; safe_start 200
for lat in 1 0; do
  pf=0; for s in $(seq 1 40); do LILY_GPU_GDN_OUT_LAT=$lat LILY_GPU_KERNELS=gdn timeout 20 $B/lily-gpu-test kernels $((3000+s)) > $L/g${lat}_$s.txt 2>&1 || pf=$((pf+1)); done
  el "gdn fused lat=$lat x40: runs failed $pf"; cat $L/g${lat}_*.txt | grep -E "^FAIL|gdn_out o differs" | cut -c1-300 | head -30
done
safe_end
