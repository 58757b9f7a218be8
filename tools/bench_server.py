#!/usr/bin/env python3
"""bench_server.py: overhead of the HTTP path against the engine's direct path (a benchmark, not
a test). Same model, same prompt, same seed, greedy, max_tokens N:

  direct : `lily run` (the engine through its task queue, no HTTP); its per-turn line gives
           prefill and decode time as the engine measured them.
  http   : `lily serve` + a raw streaming request over a kept-alive connection. Time to first
           byte (role chunk), time to first token chunk, and time between token chunks,
           measured by the client; the engine's own timings come from /metrics.

Overhead per token = (client decode time - engine decode time) / tokens.

    .venv/bin/python tools/bench_server.py --model DIR [--tokens 128] [--runs 5]
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "py"))
from lily_server import LILY, Server, make_model  # noqa: E402


def direct(model, prompt, n):
    r = subprocess.run([LILY, "run", "--model", model, "-p", prompt, "--max-tokens", str(n),
                        "--temperature", "0", "--no-think"], capture_output=True, text=True,
                       timeout=600)
    m = re.search(r"\[(\d+) prompt tokens \((\d+) cached\), prefill ([\d.]+) tok/s, (\d+) "
                  r"generated, decode ([\d.]+) tok/s", r.stderr)
    return {"prompt": int(m[1]), "gen": int(m[4]), "prefill_tps": float(m[3]),
            "decode_tps": float(m[5])}


def http_run(srv, prompt, n):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": n, "temperature": 0, "stream": True,
                       "chat_template_kwargs": {"enable_thinking": False}})
    before = srv.metrics()
    h = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
    t0 = time.perf_counter()
    h.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = h.getresponse()
    ttfb = None
    token_times = []
    while True:
        line = resp.readline()
        if not line:
            break
        now = time.perf_counter()
        if ttfb is None:
            ttfb = now - t0
        if line.startswith(b"data: ") and b'"content"' in line and b'"role"' not in line:
            token_times.append(now)
        if line.startswith(b"data: [DONE]"):
            break
    h.close()
    after = srv.metrics()
    eng_prefill = after["lily_prefill_seconds_total"] - before["lily_prefill_seconds_total"]
    eng_decode = after["lily_decode_seconds_total"] - before["lily_decode_seconds_total"]
    gen = after["lily_generated_tokens_total"] - before["lily_generated_tokens_total"]
    return {"ttfb_ms": ttfb * 1e3, "ttft_ms": (token_times[0] - t0) * 1e3,
            "client_decode_s": token_times[-1] - token_times[0], "chunks": len(token_times),
            "eng_prefill_ms": eng_prefill * 1e3, "eng_decode_s": eng_decode, "gen": gen}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    model = a.model or make_model("/tmp/lily-bench-model")
    prompt = "Explain how a hash table handles collisions. " * 4
    d = [direct(model, prompt, a.tokens) for _ in range(a.runs)]
    print("direct: prompt %d tok, prefill %.0f tok/s, decode %.0f tok/s (median of %d)" % (
        d[0]["prompt"], statistics.median(x["prefill_tps"] for x in d),
        statistics.median(x["decode_tps"] for x in d), a.runs))
    srv = Server(model, "--cache-mb", "0")  # no prefix reuse: every run prefills in full
    try:
        runs = [http_run(srv, prompt, a.tokens) for _ in range(a.runs)]
    finally:
        srv.stop()
    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    # Between the first and last token chunk the engine decoded chunks-1 tokens.
    per_tok_client = statistics.median(r["client_decode_s"] / max(1, r["chunks"] - 1) for r in runs)
    per_tok_engine = statistics.median(r["eng_decode_s"] / max(1, r["gen"]) for r in runs)
    print("http:   TTFB %.2f ms, first token %.2f ms (engine prefill %.2f ms), "
          "per token %.3f ms client vs %.3f ms engine: overhead %.3f ms/token" % (
              med("ttfb_ms"), med("ttft_ms"), med("eng_prefill_ms"), per_tok_client * 1e3,
              per_tok_engine * 1e3, (per_tok_client - per_tok_engine) * 1e3))


if __name__ == "__main__":
    main()
