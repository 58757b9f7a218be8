#!/usr/bin/env bash
# moeks.sh (device, ~2 min): moe_down with each row's chunks split over 1, 2 or 4 warps
# (LILY_CUDA_MOE_KS): kernel tests (they run all three splits against the CPU reference), e2e with
# split 2, decode speed at 4K and 32K with each split. Fuzzers on the spare cores meanwhile (FUZZ_S).
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b
B=/tmp/b; L=/tmp/logs
[ -n "${FUZZ_S:-}" ] && [ -f $C/fuzz.sh ] && bash $C/fuzz.sh $FUZZ_S &
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) & SP=$!
timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|split|passed" $L/kernels.txt | cut -c1-160
LILY_CUDA_MOE_KS=2 timeout 30 $B/lily-gpu-test e2e 31 > $L/e2e.txt 2>&1; el "e2e (split 2) rc=$?"; grep -E "FAIL|passed" $L/e2e.txt
wait $SP
for ks in 1 2 4 1; do
  LILY_CUDA_MOE_KS=$ks timeout 40 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 3 --warmup 1 --out $L/ks$ks 2>&1 | grep -E "^decode " | sed "s/^/ks=$ks /"
done
el bench
wait
tar czf $OUT/logs.tgz -C /tmp logs $( [ -d /tmp/corp ] && echo corp )
