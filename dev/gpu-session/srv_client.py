# srv_client.py: srv.sh's client. Waits for /health (gives up at once if the server process SVPID exits),
# then times 1-token completions of random token-id prompts; SRV_LENS overrides the lengths, SRV_MAXID
# the ids' bound; SRV_DECODE=1 times decode instead (sampling settings, 256 tokens).
import json, os, random, sys, time, urllib.request
base, label, pid = "http://127.0.0.1:8099", os.environ["LABEL"], int(os.environ["SVPID"])
def get(path):
    return urllib.request.urlopen(base + path, timeout=5).read().decode()
for _ in range(400):
    try:
        get("/health"); break
    except Exception:
        try: os.kill(pid, 0)
        except OSError: sys.exit("%s: the server exited" % label)
        time.sleep(0.5)
else:
    sys.exit("%s: no /health" % label)
def complete(ids, what, **kw):
    body = json.dumps(dict({"model": "m", "prompt": ids, "max_tokens": 1}, **kw)).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.time(); r = json.loads(urllib.request.urlopen(req, timeout=120).read()); dt = time.time() - t0
    print("%s: %-24s %6d tokens: %.3f s (%.0f tok/s), cached %s, text %r" % (
        label, what, len(ids), dt, len(ids) / dt, r["usage"].get("prompt_tokens_details", {}).get("cached_tokens"),
        r["choices"][0]["text"]), flush=True)
if os.environ.get("SRV_DECODE"):
    # Decode through the server: a 4096-id prompt cached whole (with its logits), then per sampling
    # setting 1 and 257 tokens with the end tokens banned; the difference is 256 decode steps.
    random.seed(2)
    ids = [random.randrange(1000, 100000) for _ in range(4096)]
    ban = {"248044": -100, "248046": -100}
    complete(ids, "decode prompt")
    # "greedy, no bias": the engine's greedy step (logit_bias takes the host sampler); the random
    # checkpoint's greedy continuation of this prompt is not expected to hit an end token (checked).
    sets = (("greedy", {"temperature": 0}), ("greedy, no bias", {"temperature": 0, "nobias": 1}),
            ("temperature 1", {"temperature": 1.0}), ("temperature 1, no bias", {"temperature": 1.0, "nobias": 1}),
            ("T 0.6, top_p .95, top_k 20", {"temperature": 0.6, "top_p": 0.95, "top_k": 20}),
            ("T 0.6, top_p .95, top_k 20, no bias", {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "nobias": 1}))
    if os.environ.get("SRV_SET") == "topp":  # top-p / min-p without top-k (the top-k step with the mass)
        sets = (("greedy, no bias", {"temperature": 0, "nobias": 1}),
                ("T 1, top_p .95", {"temperature": 1.0, "top_p": 0.95}),
                ("T 1, top_p .95, no bias", {"temperature": 1.0, "top_p": 0.95, "nobias": 1}),
                ("T 0.05, top_p .9", {"temperature": 0.05, "top_p": 0.9}),
                ("T 0.05, top_p .9, no bias", {"temperature": 0.05, "top_p": 0.9, "nobias": 1}),
                ("T 0.05, min_p .1, no bias", {"temperature": 0.05, "min_p": 0.1, "nobias": 1}))
    if os.environ.get("SRV_SET") == "edits":  # a logit bias and penalties (the top-k step's edits)
        sets = (("greedy", {"temperature": 0}), ("greedy, no bias", {"temperature": 0, "nobias": 1}),
                ("T 0.6, top_p .95, top_k 20", {"temperature": 0.6, "top_p": 0.95, "top_k": 20}),
                ("T .7, top_p .8, top_k 20, presence 1.5, no bias",
                 {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5, "nobias": 1}),
                ("T 0.05, top_p .9, frequency .5", {"temperature": 0.05, "top_p": 0.9, "frequency_penalty": 0.5}),
                ("temperature 1", {"temperature": 1.0}))
    for name, kw in sets:
        ts, ns = [], []
        for n in (1, 257):
            kw2 = dict(kw); nb = kw2.pop("nobias", 0)
            body = dict({"model": "m", "prompt": ids, "max_tokens": n, "seed": 1}, **kw2)
            if not nb: body["logit_bias"] = ban
            body = json.dumps(body).encode()
            req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
            t0 = time.time(); r = json.loads(urllib.request.urlopen(req, timeout=120).read()); ts.append(time.time() - t0)
            ns.append(r["usage"]["completion_tokens"])
            assert nb or ns[-1] == n, r["usage"]
        d = ns[1] - ns[0]
        print("%s: decode %-36s %.1f tok/s (%.3f ms a token)%s" % (label, name, d / (ts[1] - ts[0]), (ts[1] - ts[0]) / d * 1e3,
              "" if d == 256 else " (%d tokens: an end token)" % ns[1]), flush=True)
    sys.exit(0)
random.seed(1)
hi = int(os.environ.get("SRV_MAXID", "100000"))  # ids drawn from [1000, hi)
lens = [int(x) for x in os.environ.get("SRV_LENS", "4096,16384,32768").split(",")]
for n in lens:
    ids = [random.randrange(1000, hi) for _ in range(n)]
    complete(ids, "new prompt")
complete(ids + [random.randrange(1000, hi) for _ in range(256)], "same + 256 (follow-up)")
print("\n".join(label + ": " + l for l in get("/metrics").splitlines() if "prefill" in l and not l.startswith("#")))
