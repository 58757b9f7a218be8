#!/usr/bin/env bash
# dec.sh (device, ~3 min): decode through the server (srv_client.py with SRV_DECODE=1: greedy, temperature 1,
# Qwen's T 0.6 / top_p .95 / top_k 20; 256 tokens after a cached 4096-id prompt) with the previous build
# (.carry/lily_old.xz: the host sampler before its vectorisation) and this one, alternating; then
# lily bench's decode at 4K; e2e and the CPU-side sampler's tests are not needed here.
. .carry/common.sh; synth_bg; safe_start 400; ab_old; wait $SP
srv_tok
for bin in /tmp/lily_old $B/lily /tmp/lily_old $B/lily; do
  lb=$([ $bin = /tmp/lily_old ] && echo old || echo new)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 timeout 100 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 3 --warmup 1 --decode 4K --prefill none --out $L/b 2>&1 | grep -E "^decode "; el bench
safe_end
