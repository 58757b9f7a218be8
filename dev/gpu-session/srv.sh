#!/usr/bin/env bash
# srv.sh (device, ~2 min): prefill through the server on CUDA against `lily bench` (the engine's prefill
# pieces, lily_backend.prefill_piece: the engine fed prompts 256 tokens at a time until 9990f43). A
# completion of 1 token for prompts of 4K, 16K and 32K random token ids (no prefix cache), timed by the
# client and by the engine's /metrics; then the same lengths by lily bench.
. .carry/common.sh; synth_bg; safe_start 300; wait $SP
$B/lily serve --model /tmp/big --backend cuda --port 8099 --cache-mb 0 --ctx 40000 > $L/serve.txt 2>&1 & SV=$!
python3 - <<'PY'
import json, random, time, urllib.request
def get(path):
    return urllib.request.urlopen("http://127.0.0.1:8099" + path, timeout=5).read().decode()
for _ in range(240):
    try:
        get("/health"); break
    except Exception:
        time.sleep(0.5)
random.seed(1)
for n in (4096, 16384, 32768, 4096, 16384, 32768):
    ids = [random.randrange(1000, 100000) for _ in range(n)]
    body = json.dumps({"model": "m", "prompt": ids, "max_tokens": 1}).encode()
    req = urllib.request.Request("http://127.0.0.1:8099/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.time(); r = json.loads(urllib.request.urlopen(req, timeout=120).read()); dt = time.time() - t0
    print("server prompt %6d tokens: %.3f s request (%.0f tok/s), usage %s" % (n, dt, n / dt, r.get("usage")))
print("\n".join(l for l in get("/metrics").splitlines() if "prefill" in l and not l.startswith("#")))
PY
kill $SV; wait $SV 2>/dev/null; el server
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --decode none --prefill 4K,16K,32K --out $L/b 2>&1 | grep -E "^prefill "; el bench
safe_end
