#!/usr/bin/env bash
# gemm.sh (device): the wgmma GEMM: prefill kernel tests, e2e, memcheck of the small prefill tests,
# single-GEMM timings of the three kernels (mma.sync, wgmma, warp-specialised wgmma), the MoE bench rows, lily bench prefill with wgmma on and off.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b
B=/tmp/b; L=/tmp/logs
( sleep ${SAFE_S:-560}; tar czf $OUT/logs.tgz -C /tmp logs ) & SAFE=$!
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) & SP=$!
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"
grep -E "FAIL|passed" $L/prefill.txt | cut -c1-230 | head -10
timeout 60 $B/lily-gpu-test e2e 13 > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|wgmma|passed" $L/e2e.txt | cut -c1-300
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -2 $L/memcheck.txt
for s in "4096 8192 2048" "4096 2048 4096" "256 8192 2048" "1024 1024 2048"; do
  for v in "64 1" "128 1" "64 0" "64 2" "128 2"; do $B/lily-gpu-test qgone $s $v | grep qgone; done
done
timeout 60 ncu --set full -k regex:qgemm --launch-skip 1 --launch-count 1 $B/lily-gpu-test qgone 4096 8192 2048 64 1 > $OUT/ncu-wg.txt 2>&1; el "ncu wg rc=$?"
timeout 100 $B/lily-gpu-test prefill 5 bench > $L/bench.txt 2>&1; el "bench rc=$?"; grep -E "^\| MoE " $L/bench.txt
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1"
ab() { local name=$1; shift; env "$@" timeout 60 $BB --prefill ${LENS:-512,2K,4K,32K} --out $L/ab_$name 2>&1 | grep -E "^prefill " | sed "s/^/$name /"; }
ab wgmma LILY_LOG=0; ab mmasync LILY_CUDA_WGMMA=0; ab wgmma_ws LILY_CUDA_QG_WS=1
el bench
kill $SAFE; wait
tar czf $OUT/logs.tgz -C /tmp logs
