#!/usr/bin/env bash
# final2.sh (device, ~7 min): the session's closing check of main (close.sh with the MoE racecheck and the
# decode sweep), then through the server: decode (srv_client.py SRV_DECODE=1: greedy now by the backend's
# greedy step, temperature 1, Qwen's sampling) and prefill with the default snapshot interval.
CLOSE_DECODE=1 bash .carry/close.sh
. .carry/common.sh
xz -dc $C/tok/tokenizer.json.xz > /tmp/big/tokenizer.json && cp $C/tok/tokenizer_config.json /tmp/big/
$B/lily serve --model /tmp/big --backend cuda --port 8099 --ctx 40000 > $L/serve_final.txt 2>&1 & SV=$!
LABEL=decode SVPID=$SV SRV_DECODE=1 timeout 100 python3 .carry/srv_client.py
LABEL=prefill SVPID=$SV timeout 100 python3 .carry/srv_client.py; kill $SV; wait $SV 2>/dev/null; el servers
tar czf $OUT/logs.tgz -C /tmp logs
