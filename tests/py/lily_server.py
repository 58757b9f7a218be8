"""lily_server.py: helpers for the server tests (tests/py/test_server*.py): build a tiny model
directory and run `lily serve` on a free port, always stopping it afterwards.

The model is `lily synth --preset tiny --vocab 4096` (random weights) with the small trained
tokenizer of tests/fixtures/tokenizers/small and the Qwen3.5 chat template. Random weights make
arbitrary text, so the tests check structure and behaviour, never words.
"""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LILY = os.environ.get("LILY_BIN") or os.path.join(ROOT, "build", "lily")
VOCAB = 4096


def _widen_fixture(out):
    """Fallback while `lily synth` is missing: the hf-text fixture with embed/lm_head widened to
    VOCAB rows of random bf16."""
    import numpy as np

    src = os.path.join(ROOT, "tests", "fixtures", "models", "hf-text")
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    hdr.pop("__metadata__", None)
    rng = np.random.default_rng(1)
    new, blobs, off = {}, [], 0
    for k, v in hdr.items():
        a, b = v["data_offsets"]
        raw, shape = data[a:b], v["shape"]
        if k in ("lm_head.weight", "model.embed_tokens.weight"):
            shape = [VOCAB, shape[1]]
            x = rng.standard_normal(shape).astype(np.float32)
            raw = (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        new[k] = {"dtype": v["dtype"], "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    hb = json.dumps(new).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["vocab_size"] = VOCAB
    cfg["eos_token_id"] = 4089
    cfg["max_position_embeddings"] = 8192
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))


def end_token_bias(model):
    """logit_bias forbidding <|endoftext|> and <|im_end|> of the model's own tokenizer (random
    weights may sample them at any step; tests that count tokens forbid them)."""
    out = subprocess.run([LILY, "tokenize", "--model", model, "--text", "<|endoftext|><|im_end|>"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {str(i): -100 for i in json.loads(out)}


def make_model(out):
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([LILY, "synth", "--preset", "tiny", "--vocab", str(VOCAB), "--out", out],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        _widen_fixture(out)
    tok = os.path.join(ROOT, "tests", "fixtures", "tokenizers", "small")
    for name in os.listdir(tok):
        shutil.copy(os.path.join(tok, name), out)
    shutil.copy(os.path.join(ROOT, "tests", "fixtures", "templates", "qwen3.5.jinja"),
                os.path.join(out, "chat_template.jinja"))
    return out


class Server:
    """`lily serve` on a free port (port 0; the port comes back through $LILY_PORT_FILE)."""

    def __init__(self, model, *args, env=None, api_key=None):
        self.tmp = tempfile.mkdtemp(prefix="lily-srv-")
        port_file = os.path.join(self.tmp, "port")
        e = dict(os.environ, LILY_PORT_FILE=port_file)
        e.pop("LILY_TEST_OUTPUT", None)
        e.update(env or {})
        cmd = [LILY, "serve", "--model", model, "--port", "0", "--model-id", "tiny"] + list(args)
        if api_key:
            cmd += ["--api-key", api_key]
        self.api_key = api_key
        self.log = open(os.path.join(self.tmp, "log"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=e)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("lily serve exited: " + self.logs())
            try:
                self.port = int(open(port_file).read())
                break
            except (OSError, ValueError):
                time.sleep(0.05)
        if not self.port:
            self.stop()
            raise RuntimeError("lily serve did not start: " + self.logs())
        self.url = "http://127.0.0.1:%d" % self.port
        while self.get("/health")[0] != 200:
            time.sleep(0.05)

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM, and check that the server exits 0 (a sanitizer report, a leak at exit included,
        makes it non-zero under `make test SAN=1`). A server that already died fails too, unless the
        test set `expect_exit`."""
        problem = None
        rc = self.proc.poll()
        if rc is not None and rc != 0 and not getattr(self, "expect_exit", False):
            problem = "lily serve had died (exit %d): %s" % (rc, self.logs())
        if rc is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(timeout=30)
                if rc != 0:
                    problem = "lily serve exited %d after SIGTERM: %s" % (rc, self.logs())
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
                problem = "lily serve did not exit within 30 s of SIGTERM: " + self.logs()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if problem:
            raise AssertionError(problem)

    def client(self, **kw):
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none",
                             max_retries=0, timeout=60, **kw)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """Raw HTTP: returns (status, headers, body bytes)."""
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get(self, path, **kw):
        try:
            return self.request("GET", path, **kw)
        except OSError:
            return 0, {}, b""

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def metrics(self):
        st, _, b = self.get("/metrics")
        assert st == 200
        out = {}
        for line in b.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k] = float(v)
        return out
