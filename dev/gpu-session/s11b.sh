#!/usr/bin/env bash
# s11b.sh (device, ~6 min; eleventh session): the top-k step (topk.cu, lily_backend.step_topk: the engine's
# sampled requests draw from the k largest logits without copying all of them to the host) and the
# raster default. Kernels (the top-k against the CPU and the sampler's selection), e2e (the step
# against forward's logits); pfprof 4K with the wide tile forced on the MoE down projection; decode
# bench 4K; the server's decode, srv-pipe's build (.carry/p.tar.xz: the greedy step pipelined, no top-k
# step) against this one, alternating, now with a greedy request without logit bias (the greedy step).
. .carry/common.sh; synth_bg; safe_start 500
mkdir -p /tmp/p; tar xJf $C/p.tar.xz -C /tmp/p
timeout 120 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head
grep -E "top-k" $L/kernels.txt | cut -c1-160
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|top-k step" $L/e2e.txt | cut -c1-200
wait $SP; el synth
for v in 1 2; do LILY_CUDA_QG_WIDE=$v timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; echo "== pfprof QG_WIDE=$v"; grep -E "\|" $L/pfprof$v.txt | head -8; grep -E "total|plain" $L/pfprof$v.txt | head -3; done; el pfprof
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 3 --warmup 1 --decode 4K --prefill 4K --out $L/b 2>&1 | grep -E "^(decode|prefill) "; el bench
srv_tok
for bin in /tmp/p/lily $B/lily /tmp/p/lily $B/lily; do
  lb=$([ $bin = $B/lily ] && echo topk || echo pipe)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 timeout 120 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
safe_end
