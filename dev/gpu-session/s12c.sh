#!/usr/bin/env bash
# s12c.sh (device, ~7 min; twelfth session, third call). The wgmma GEMM's skip of warpgroups without rows
# as a warp-uniform branch (s12a/s12b's plain branch made ptxas serialise every wgmma: C7518). Prefill
# tests, then prefill of the session's base (old) and of this build with LILY_CUDA_MOE_TAILS 0..3,
# alternating twice; pfprof 4K of modes 1, 2, 3.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
timeout 200 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
wait $SP; el synth
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,4K,8K,32K --decode none"
for r in 1 2; do
  timeout 100 /tmp/lily_old bench $P --out $L/old 2>&1 | grep -E "^prefill " | sed "s/^/old     /"
  for m in 0 1 2 3; do
    LILY_CUDA_MOE_TAILS=$m timeout 100 $B/lily bench $P --out $L/ab_$m 2>&1 | grep -E "^prefill " | sed "s/^/tails=$m /"
  done
done; el bench
for m in 1 2 3; do
  LILY_CUDA_MOE_TAILS=$m timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$m.txt 2>&1; el "pfprof tails=$m"; grep -E "plain|moe experts" $L/pfprof$m.txt
done
safe_end
