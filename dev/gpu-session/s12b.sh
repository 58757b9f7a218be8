#!/usr/bin/env bash
# s12b.sh (device, ~8 min; twelfth session, second call). (1) The top-k step with the softmax's mass
# (top-p / min-p requests without top_k): the top-k kernel tests with the mass, memcheck and racecheck
# of them, e2e (step_topk's mass and logits_last). (2) The wgmma GEMM's warpgroups without rows skip
# their MMAs: prefill tests, then LILY_CUDA_MOE_TAILS 0 / 1 / 2 alternating (0 now runs a group's tail
# on its last 128-row tile with one warpgroup's MMAs, the weights from L2), pfprof 4K of 0. (3) The
# server's decode for top-p / min-p settings, the session's base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 570; ab_old
LILY_GPU_KERNELS=topk timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/topk.txt 2>&1; el "topk rc=$?"; grep -E "FAIL|passed|mass" $L/topk.txt | cut -c1-200 | head -8
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/memcheck_topk.txt 2>&1; el "memcheck topk rc=$?"; tail -1 $L/memcheck_topk.txt
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/racecheck_topk.txt 2>&1; el "racecheck topk rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck_topk.txt | head -3
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|top-k step" $L/e2e.txt | cut -c1-260
timeout 200 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
wait $SP; el synth
for r in 1 2; do for m in 0 1 2; do
  LILY_CUDA_MOE_TAILS=$m timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,4K,8K,32K --decode none --out $L/ab_$m 2>&1 | grep -E "^prefill " | sed "s/^/tails=$m /"
done; done; el bench
LILY_CUDA_MOE_TAILS=0 timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof0.txt 2>&1; el "pfprof tails=0"; grep -E "plain|moe experts" $L/pfprof0.txt
srv_tok
for bin in /tmp/lily_old $B/lily /tmp/lily_old $B/lily; do
  lb=$([ $bin = $B/lily ] && echo new || echo old)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 SRV_SET=topp timeout 150 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
safe_end
