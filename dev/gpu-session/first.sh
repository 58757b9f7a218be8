#!/usr/bin/env bash
# first.sh (device): a session's first call. The GPU suite on the carried build (tests/run_gpu.sh),
# fuzzers on the spare cores (FUZZ_S), then Nsight Compute counters: qgemm and the GDN chunked
# kernels at the full model's shapes (lily-gpu-test prefill bench), and the decode step's kernels on
# the full-size synthetic model (lily logits --step 1: GEMV, MoE, GDN, attention as the graph runs
# them). Logs in $OUT/logs.tgz, ncu reports in $OUT/ncu-*.txt.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib
mkdir -p /tmp/b /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b
B=/tmp/b; L=/tmp/logs
[ -n "${FUZZ_S:-}" ] && [ -f $C/fuzz.sh ] && bash $C/fuzz.sh $FUZZ_S &
( sleep ${SAFE_S:-560}; tar czf $OUT/logs.tgz -C /tmp logs ) & SAFE=$!
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) &
LILY_GPU_TEST=$B/lily-gpu-test LILY_BIN=$B/lily timeout ${SUITE_S:-330} bash tests/run_gpu.sh > $L/gpu.txt 2>&1
el "run_gpu rc=$?"; grep -E "^(PASS|FAIL)|FAIL|passed" $L/gpu.txt | cut -c1-200 | tail -30
export LILY_LOG=0
S="--clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats"
timeout 70 ncu $S -k regex:'moe_gate_up_kernel|moe_down_kernel|gemv|gdn_kernel|attn_kernel' --launch-skip 300 --launch-count 14 \
    $B/lily logits --model /tmp/big --ids 1,2,3,4,5,6 --step 1 --backend cuda --out /tmp/x.f32 > $OUT/ncu-decode.txt 2>&1; el "ncu decode rc=$?"
timeout 80 ncu $S -k regex:qgemm --launch-skip 40 --launch-count 5 $B/lily-gpu-test prefill 5 bench > $OUT/ncu-qgemm.txt 2>&1; el "ncu qgemm rc=$?"
timeout 50 ncu $S -k regex:gdn_chunk --launch-skip 20 --launch-count 3 $B/lily-gpu-test prefill 5 bench > $OUT/ncu-gdn.txt 2>&1; el "ncu gdn rc=$?"
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1"
ab() { local name=$1; shift; env "$@" timeout 50 $BB --prefill ${LENS:-512,2K,32K} --out $L/ab_$name 2>&1 | grep -E "^prefill " | sed "s/^/$name /"; }
[ $(( $(date +%s) - t0 )) -lt 430 ] && { ab default LILY_LOG=0; ab hostroute LILY_CUDA_HOST_ROUTE=1; ab sepdequant LILY_CUDA_SEP_DEQUANT=1; el ablations; }
grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Block Limit" $OUT/ncu-*.txt | cut -c1-150 | head -120
kill $SAFE; wait
tar czf $OUT/logs.tgz -C /tmp logs
