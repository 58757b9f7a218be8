#!/usr/bin/env bash
# srv.sh (device, ~3 min): prefill through the server on CUDA against `lily bench`. The engine feeds a prompt
# to the backend in pieces: lily_backend.prefill_piece (256 tokens for every backend until 9990f43; 16384 on
# CUDA now), and never across a prefix-cache snapshot stop (every --snapshot-every tokens, default 4096, and
# the last <|im_start|>), where it also copies the state to host memory. A 1-token completion for prompts of
# 4K, 16K and 32K random token ids, timed by the client, for three server settings: no prefix cache
# (--cache-mb 0), the defaults, and snapshots every 16384 tokens; then the same lengths by lily bench.
. .carry/common.sh; synth_bg; safe_start 400; wait $SP
serve_run() { # label, server args...
  local label=$1; shift
  $B/lily serve --model /tmp/big --backend cuda --port 8099 --ctx 40000 "$@" > $L/serve_$label.txt 2>&1 & SV=$!
  LABEL=$label python3 - <<'PY'
import json, os, random, time, urllib.request
def get(path):
    return urllib.request.urlopen("http://127.0.0.1:8099" + path, timeout=5).read().decode()
for _ in range(240):
    try:
        get("/health"); break
    except Exception:
        time.sleep(0.5)
random.seed(1)
for n in (4096, 16384, 32768, 32768):
    ids = [random.randrange(1000, 100000) for _ in range(n)]
    body = json.dumps({"model": "m", "prompt": ids, "max_tokens": 1}).encode()
    req = urllib.request.Request("http://127.0.0.1:8099/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.time(); r = json.loads(urllib.request.urlopen(req, timeout=120).read()); dt = time.time() - t0
    print("%s: prompt %6d tokens: %.3f s (%.0f tok/s)" % (os.environ["LABEL"], n, dt, n / dt))
print("\n".join(os.environ["LABEL"] + ": " + l for l in get("/metrics").splitlines() if "prefill" in l and not l.startswith("#")))
PY
  kill $SV; wait $SV 2>/dev/null; el "server $label"
}
serve_run nocache --cache-mb 0
serve_run defaults
serve_run snap16k --snapshot-every 16384
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,16K,32K --out $L/b 2>&1 | grep -E "^prefill "; el bench
safe_end
