"""test_soak_short.py: a short run of tools/soak.py (docs/RELIABILITY.md): two `lily serve` on the
demo model, 4 concurrent clients for ~20 s of mixed traffic (streaming and not, cancellations,
aborted requests, tool calls, long prompts, multi-turn prefix reuse, deliberate bad requests).
Every response must be valid, the /metrics counts must match what the clients saw, both servers
must exit 0 on SIGTERM, and (except under ASan, whose quarantine holds freed memory) RSS must stay
flat after warm-up.

    LILY_BIN=build/lily .venv/bin/python -m pytest -q tests/py/test_soak_short.py
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_soak_short():
    lily = os.environ.get("LILY_BIN") or os.path.join(ROOT, "build", "lily")
    san = os.environ.get("LILY_BUILD") == "build-san"
    out = os.path.join(tempfile.mkdtemp(prefix="lily-soak-"), "soak.json")
    cmd = [sys.executable, os.path.join(ROOT, "tools", "soak.py"), "--lily", lily,
           "--seconds", os.environ.get("LILY_SOAK_SECONDS", "20"), "--clients", "4",
           "--cache-mb", "2", "--warmup", "0.5", "--seed", "7", "--json", out]
    if san:
        cmd.append("--no-rss-check")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(r.stdout[-6000:], r.stderr[-3000:])
    assert r.returncode == 0, "soak failed (see the summary above)"
    s = json.load(open(out))
    assert s["n_problems"] == 0
    # The mix really ran: each kind of traffic happened, and the servers saw it.
    for kind in ("chat", "chat_stream", "tool", "cancel_stream", "abort", "bad"):
        assert s["actions"].get(kind, 0) >= 1, kind
    plain = s["servers"]["plain"]
    assert plain["exit"] == 0 and s["servers"]["scripted"]["exit"] == 0
    assert plain["metrics"]["http_client_errors_total"] == plain["seen"]["bad"] > 0
