"""test_soak_short.py: a short run of tools/soak.py (docs/RELIABILITY.md): two `lily serve` on a
tiny random model with the demo model's tokenizer and template (its state snapshots are a few KB,
so a 2 MB prefix cache holds every conversation, as the multi-turn check expects; the 30-minute
soak runs on models/demo itself with a larger cache), 4 concurrent clients for ~20 s of mixed traffic (streaming and not, cancellations,
aborted requests, tool calls, long prompts, multi-turn prefix reuse, deliberate bad requests).
Every response must be valid, the /metrics counts must match what the clients saw, both servers
must exit 0 on SIGTERM, and (except under ASan, whose quarantine holds freed memory) RSS must stay
flat after warm-up.

    LILY_BIN=build/lily .venv/bin/python -m pytest -q tests/py/test_soak_short.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_soak_short():
    lily = os.environ.get("LILY_BIN") or os.path.join(ROOT, "build", "lily")
    san = os.environ.get("LILY_BUILD") == "build-san"
    tmp = tempfile.mkdtemp(prefix="lily-soak-")
    out, model = os.path.join(tmp, "soak.json"), os.path.join(tmp, "model")
    subprocess.run([lily, "synth", "--preset", "tiny", "--vocab", "8192", "--seed", "7", "--out", model],
                   check=True, capture_output=True, timeout=120)
    demo = os.path.join(ROOT, "models", "demo")
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        shutil.copy(os.path.join(demo, f), model)
    cmd = [sys.executable, os.path.join(ROOT, "tools", "soak.py"), "--lily", lily, "--model", model,
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
