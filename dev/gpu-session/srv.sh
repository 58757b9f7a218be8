#!/usr/bin/env bash
# srv.sh (device, ~3 min): prefill through the server on CUDA against `lily bench`. The engine feeds a prompt
# to the backend in pieces (lily_backend.prefill_piece: 16384 on CUDA) and stops at every prefix-cache
# snapshot (every --snapshot-every tokens, default 16384 on CUDA, and the last <|im_start|>), where it copies the
# state to host memory. For each server setting, a 1-token completion of random token-id prompts of 4K, 16K
# and 32K, then the 32K one again plus 256 new ids (a follow-up turn: resume from the cache), timed by the
# client; then the same lengths by lily bench. The synthetic checkpoint gets the Qwen3.5 tokenizer files
# carried in .carry/tok (the server detokenises its output). SRV_SETTINGS: "label|VAR=V ...|args;..." to override
# (- for no environment).
. .carry/common.sh; synth_bg; safe_start ${SRV_SAFE:-400}; wait $SP
xz -dc $C/tok/tokenizer.json.xz > /tmp/big/tokenizer.json && cp $C/tok/tokenizer_config.json /tmp/big/
serve_run() { # label, environment (VAR=V ... or -), server args...
  local label=$1 envs=$2; shift 2; [ "$envs" = - ] && envs=
  env $envs $B/lily serve --model /tmp/big --backend cuda --port 8099 --ctx 40000 "$@" > $L/serve_$label.txt 2>&1 & SV=$!
  LABEL=$label SVPID=$SV timeout 200 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
  el "server $label"; grep -vE "^\s*$" $L/serve_$label.txt | tail -2
}
IFS=';' read -ra SETS <<< "${SRV_SETTINGS:-nocache|-|--cache-mb 0;defaults|-|}"
for s in "${SETS[@]}"; do IFS='|' read -r lb ev ar <<< "$s"; serve_run $lb "$ev" $ar; done
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,16K,32K --out $L/b 2>&1 | grep -E "^prefill "; el bench
safe_end
