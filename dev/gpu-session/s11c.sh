#!/usr/bin/env bash
# s11c.sh (device, ~2 min; eleventh session): the server's decode with a sampled request that takes the
# top-k step (no logit bias) beside the same settings with a bias (the full logits to the host), two
# server runs; pfprof 4K with the MoE GEMMs' 128-row launches and tails in rows of their own.
. .carry/common.sh; synth_bg; safe_start 300; wait $SP; el synth
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; grep -E "\|" $L/pfprof.txt | head -20; grep -E "plain" $L/pfprof.txt; el pfprof
srv_tok
for i in 1 2; do
  $B/lily serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$i.txt 2>&1 & SV=$!
  LABEL=run$i SVPID=$SV SRV_DECODE=1 timeout 120 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
safe_end
