#!/usr/bin/env bash
# s12f.sh (device, ~4 min; twelfth session): the top-k step with the sampler's logit edits (bias and
# penalties applied where the logits are). Top-k kernels, e2e (the step with edits against forward +
# the host's edits, bitwise), memcheck of e2e's top-k cases is in e2e's run; then the server's decode
# at 4K for bias / penalty settings, the session's base and this build.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
LILY_GPU_KERNELS=topk timeout 60 $B/lily-gpu-test kernels $(date +%s) > $L/topk.txt 2>&1; el "topk rc=$?"; grep -E "FAIL|passed" $L/topk.txt | head -3
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed|top-k step" $L/e2e.txt | cut -c1-300
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test e2e 3 > $L/memcheck_e2e.txt 2>&1; el "memcheck e2e rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/memcheck_e2e.txt | head -3
wait $SP; el synth
srv_tok
for bin in /tmp/lily_old $B/lily; do
  lb=$([ $bin = $B/lily ] && echo new || echo old)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 SRV_SET=edits timeout 150 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
safe_end
