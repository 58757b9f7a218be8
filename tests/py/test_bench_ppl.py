"""test_bench_ppl.py: `lily bench` and `lily ppl` on the CPU backend with the tiny fixtures.

bench: two short lengths; the JSON is checked for shape and sanity (fields present, positive finite
numbers, consistent units), never for speed. Its cost model is checked against an independent count
of the fixture's weight bytes read from the safetensors header here.
ppl: against each fixture's HF reference logits: top-1 agreement must be 100 % (the fixtures were
made with clear top-1 and routing margins), the perplexity must equal a numpy recomputation from
the reference logits, and bad inputs must give clear errors.
tools/hf_ref_logits.py is checked against the fixtures too when torch is importable (not in CI).

Run: LILY_BIN=build/lily .venv/bin/python -m pytest -q tests/py/test_bench_ppl.py
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LILY = os.environ.get("LILY_BIN", os.path.join(ROOT, "build", "lily"))
FIX = os.path.join(ROOT, "tests", "fixtures", "models")
FIXTURES = ["hf-sharded", "hf-text", "mlx-4bit", "hf-gqa"]


def lily(*args, check=True):
    p = subprocess.run([LILY, *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LILY_THREADS="2"))
    if check and p.returncode != 0:
        raise AssertionError(f"lily {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def text_config(name):
    with open(os.path.join(FIX, name, "config.json")) as f:
        c = json.load(f)
    return c.get("text_config", c)


def ids_of(name):
    with open(os.path.join(FIX, name, "ids.txt")) as f:
        return [int(t) for t in re.split(r"[,\s]+", f.read()) if t]


def ref_logits(name):
    V = text_config(name)["vocab_size"]
    return np.fromfile(os.path.join(FIX, name, "ref_logits.f32"), dtype="<f4").reshape(-1, V)


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


# ------------------------------------------------------------------------------------------------
# bench
@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bench") / "run")
    p = lily("bench", "--model", os.path.join(FIX, "mlx-4bit"), "--lengths", "8,16", "--reps", "2",
             "--warmup", "1", "--steps", "4", "--out", out)
    with open(out + ".json") as f:
        return out, json.load(f), p.stdout


def test_bench_json_shape(bench_run):
    out, j, stdout = bench_run
    for k in ("tool", "version", "date", "commit", "backend", "model", "device", "threads", "flags",
              "config", "ceilings", "cost", "mem_source", "prefill", "decode"):
        assert k in j, k
    assert j["backend"] == "cpu"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", j["date"])
    assert j["commit"]
    assert j["device"]["name"]
    assert j["config"]["vocab_size"] == text_config("mlx-4bit")["vocab_size"]
    assert j["flags"]["reps"] == 2 and j["flags"]["decode_steps"] == 4 and j["flags"]["ablate"] == []
    assert j["ceilings"]["source"] == "host"
    assert positive(j["ceilings"]["copy_gbps"]) and positive(j["ceilings"]["gemm_tflops"])
    for kind, rate in (("prefill", "tflops"), ("decode", "gbps")):
        pts = j[kind]
        assert [p["len"] for p in pts] == [8, 16]
        for p in pts:
            for k in ("tok_s", "ms_per_tok", rate, "roofline_tok_s", "roofline_frac", "peak_mem"):
                assert positive(p[k]), (kind, k, p)
            assert len(p["times_s"]) == 2 and all(positive(t) for t in p["times_s"])
            assert abs(p["tok_s"] * p["ms_per_tok"] - 1000) < 1e-6 * 1000
            assert abs(p["roofline_frac"] - p["tok_s"] / p["roofline_tok_s"]) < 1e-6
    # Each prefill repetition is one forward of `len` tokens; each decode one of 4 steps.
    for p in j["prefill"]:
        assert abs(p["tok_s"] - p["len"] / float(np.median(p["times_s"]))) < 1e-6 * p["tok_s"]
    for p in j["decode"]:
        assert abs(p["tok_s"] - 4 / float(np.median(p["times_s"]))) < 1e-6 * p["tok_s"]
    assert "prefill" in stdout and "decode" in stdout and "roofline" in stdout


def test_bench_plot(bench_run):
    out, _, _ = bench_run
    if shutil.which("gnuplot") is None:
        pytest.skip("gnuplot not installed")
    with open(out + ".png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def safetensors_sizes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items() if k != "__metadata__"}


def test_bench_cost_model_counts_weight_bytes(bench_run):
    """Decode bytes per token, counted here from the MLX fixture's tensor sizes: every attention and
    GDN projection, the router, top-k of the experts, the shared expert and its gate, one embedding
    row and all of lm_head (codes + scales + biases)."""
    _, j, _ = bench_run
    c = text_config("mlx-4bit")
    sizes = safetensors_sizes(os.path.join(FIX, "mlx-4bit", "model.safetensors"))
    parts = (".weight", ".scales", ".biases")
    want = 0
    for k, v in sizes.items():
        if not k.endswith(parts):
            continue
        base = k.rsplit(".", 1)[0]
        if base.endswith(("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj",
                          "q_proj", "k_proj", "v_proj", "o_proj", "mlp.gate",
                          "shared_expert_gate")) or ".shared_expert." in base:
            want += v
        elif ".switch_mlp." in base:
            want += v * c["num_experts_per_tok"] / c["num_experts"]
        elif base.endswith("embed_tokens"):
            want += v / c["vocab_size"]
        elif base.endswith("lm_head"):
            want += v
    assert abs(j["cost"]["decode_weight_bytes"] - want) < 1e-9 * want, (j["cost"], want)
    hs = c["linear_num_value_heads"] * c["linear_key_head_dim"] * c["linear_value_head_dim"]
    n_gdn = c["layer_types"].count("linear_attention")
    assert j["cost"]["decode_state_bytes"] == n_gdn * hs * 4 * 2
    n_full = c["layer_types"].count("full_attention")
    assert j["cost"]["kv_bytes_per_ctx"] == n_full * 2 * c["num_key_value_heads"] * c["head_dim"] * 2


def test_bench_compare(bench_run):
    out, j, _ = bench_run
    p = lily("bench", "--compare", out + ".json", out + ".json")
    rows = [l.split() for l in p.stdout.splitlines() if l.startswith(("prefill", "decode"))]
    assert len(rows) == 4
    assert all(r[-1] == "1.000" for r in rows)


def test_bench_merge(bench_run, tmp_path):
    """--merge joins runs that together make one sweep: points by length, a later file's point
    replacing an earlier one of the same length, the inputs listed in merged_from."""
    out, j, _ = bench_run
    a = dict(j, decode=[])
    b = dict(j, prefill=[dict(j["prefill"][-1], tok_s=123.5)])
    for name, d in (("a", a), ("b", b)):
        with open(tmp_path / (name + ".json"), "w") as f:
            json.dump(d, f)
    m = str(tmp_path / "m")
    p = lily("bench", "--merge", m, str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    with open(m + ".json") as f:
        mj = json.load(f)
    assert [q["len"] for q in mj["prefill"]] == [q["len"] for q in j["prefill"]]
    assert mj["prefill"][-1]["tok_s"] == 123.5 and mj["prefill"][0] == j["prefill"][0]
    assert mj["decode"] == j["decode"]
    assert [x["file"] for x in mj["merged_from"]] == [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    if shutil.which("gnuplot"):
        with open(m + ".png", "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # Unsorted input points come out sorted.
    with open(tmp_path / "c.json", "w") as f:
        json.dump(dict(j, prefill=j["prefill"][::-1]), f)
    lily("bench", "--merge", m, str(tmp_path / "c.json"))
    with open(m + ".json") as f:
        assert [q["len"] for q in json.load(f)["prefill"]] == sorted(q["len"] for q in j["prefill"])
    # Bad inputs: a point without tok_s, another backend, no inputs.
    with open(tmp_path / "bad.json", "w") as f:
        json.dump(dict(j, prefill=[{"len": 8}]), f)
    p = lily("bench", "--merge", m, str(tmp_path / "bad.json"), check=False)
    assert p.returncode != 0 and "bad.json" in p.stderr
    with open(tmp_path / "gpu.json", "w") as f:
        json.dump(dict(j, backend="cuda"), f)
    p = lily("bench", "--merge", m, str(tmp_path / "a.json"), str(tmp_path / "gpu.json"), check=False)
    assert p.returncode != 0 and "not one sweep" in p.stderr
    p = lily("bench", "--merge", m, check=False)
    assert p.returncode == 2


def test_bench_bad_inputs(tmp_path):
    p = lily("bench", "--model", os.path.join(FIX, "mlx-4bit"), "--lengths", "8,x", check=False)
    assert p.returncode == 2 and "bad length list" in p.stderr
    p = lily("bench", "--model", str(tmp_path / "nope"), "--lengths", "8", "--out",
             str(tmp_path / "b"), check=False)
    assert p.returncode != 0 and "nope" in p.stderr
    p = lily("bench", "--compare", str(tmp_path / "a.json"), check=False)
    assert p.returncode == 2
    p = lily("bench", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), check=False)
    assert p.returncode != 0 and "a.json" in p.stderr
    p = lily("bench", "--model", os.path.join(FIX, "mlx-4bit"), "--backend", "tpu", check=False)
    assert p.returncode != 0 and "tpu" in p.stderr


# ------------------------------------------------------------------------------------------------
# ppl
def numpy_ppl(logits, ids):
    x = logits[:-1].astype(np.float64)
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    nll = lse - x[np.arange(len(ids) - 1), ids[1:]]
    return float(np.exp(nll.mean()))


@pytest.mark.parametrize("name", FIXTURES)
def test_ppl_against_reference(name, tmp_path):
    d = os.path.join(FIX, name)
    out = str(tmp_path / "ppl.json")
    # A chunk that does not divide n: the state must carry across forward calls.
    lily("ppl", "--model", d, "--tokens", os.path.join(d, "ids.txt"), "--ref-logits",
         os.path.join(d, "ref_logits.f32"), "--json", out, "--chunk", "7")
    with open(out) as f:
        j = json.load(f)
    ids = ids_of(name)
    ref = ref_logits(name)
    n = len(ids)
    assert j["tokens"] == n and j["predictions"] == n - 1 and len(j["positions"]) == n
    want = numpy_ppl(ref, np.array(ids))
    assert abs(j["ref"]["ppl"] - want) < 1e-6 * want
    assert abs(j["ppl"] - want) < 1e-3 * want  # fp32 engine vs fp32 reference
    assert j["ref"]["top1_agree"] == n and j["ref"]["top1_agreement"] == 1.0
    assert j["ref"]["max_abs_err"] < 1e-2 and j["ref"]["mean_kl"] < 1e-5
    top1 = ref.argmax(1)
    for p in j["positions"]:
        assert p["id"] == ids[p["pos"]] and p["ref_top1"] == top1[p["pos"]] and p["agree"]
    assert j["positions"][-1]["nll"] is None


def test_ppl_per_position_and_no_ref(tmp_path):
    d = os.path.join(FIX, "hf-text")
    p = lily("ppl", "--model", d, "--tokens", os.path.join(d, "ids.txt"), "--per-position")
    lines = [l for l in p.stdout.splitlines() if re.match(r"\s*\d+\s", l)]
    assert len(lines) == len(ids_of("hf-text"))
    assert re.search(r"^ppl [0-9.]+ ", p.stdout, re.M)
    # Token ids separated by white space and newlines read the same as comma-separated ones.
    f = tmp_path / "ids.txt"
    f.write_text("\n".join(str(i) for i in ids_of("hf-text")) + "\n")
    q = lily("ppl", "--model", d, "--tokens", str(f))
    assert q.stdout.splitlines()[-1] == p.stdout.splitlines()[-1]


def test_ppl_ref_disagreement_is_reported(tmp_path):
    """A reference that differs must show up: swap two logits in every row of the reference."""
    name = "mlx-4bit"
    d = os.path.join(FIX, name)
    ref = ref_logits(name).copy()
    top = ref.argmax(1)
    rows = np.arange(len(ref))
    low = ref.argmin(1)
    ref[rows, top], ref[rows, low] = ref[rows, low], ref[rows, top].copy()
    bad = tmp_path / "bad.f32"
    ref.astype("<f4").tofile(bad)
    out = str(tmp_path / "p.json")
    lily("ppl", "--model", d, "--tokens", os.path.join(d, "ids.txt"), "--ref-logits", str(bad),
         "--json", out)
    with open(out) as f:
        j = json.load(f)
    assert j["ref"]["top1_agree"] == 0 and j["ref"]["max_abs_err"] > 1


def test_ppl_bad_inputs(tmp_path):
    d = os.path.join(FIX, "mlx-4bit")
    V = text_config("mlx-4bit")["vocab_size"]
    ids = os.path.join(d, "ids.txt")
    p = lily("ppl", "--model", d, check=False)
    assert p.returncode == 2 and "--tokens" in p.stderr
    p = lily("ppl", "--model", d, "--tokens", str(tmp_path / "missing.txt"), check=False)
    assert p.returncode != 0 and "missing.txt" in p.stderr
    f = tmp_path / "oob.txt"
    f.write_text(f"1,2,{V}")
    p = lily("ppl", "--model", d, "--tokens", str(f), check=False)
    assert p.returncode != 0 and "outside the vocabulary" in p.stderr and str(V) in p.stderr
    f.write_text("1,2,three")
    p = lily("ppl", "--model", d, "--tokens", str(f), check=False)
    assert p.returncode != 0 and "expected a token id" in p.stderr
    f.write_text("5")
    p = lily("ppl", "--model", d, "--tokens", str(f), check=False)
    assert p.returncode != 0 and "at least 2" in p.stderr
    short = tmp_path / "short.f32"
    ref_logits("mlx-4bit")[:-1].tofile(short)
    p = lily("ppl", "--model", d, "--tokens", ids, "--ref-logits", str(short), check=False)
    assert p.returncode != 0 and "expected" in p.stderr and "short.f32" in p.stderr
    p = lily("ppl", "--model", d, "--tokens", ids, "--ref-logits", str(tmp_path / "no.f32"),
             check=False)
    assert p.returncode != 0 and "no.f32" in p.stderr


# ------------------------------------------------------------------------------------------------
# tools/hf_ref_logits.py (needs torch + transformers; skipped in CI)
@pytest.mark.parametrize("name", ["mlx-4bit", "hf-sharded"])
def test_hf_ref_logits_script(name, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    d = os.path.join(FIX, name)
    out = tmp_path / "ref.f32"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "hf_ref_logits.py"), "--model", d,
                    "--tokens", os.path.join(d, "ids.txt"), "--out", str(out), "--dtype", "fp32",
                    "--device", "cpu", "--attn", "eager"], check=True, timeout=600)
    got = np.fromfile(out, dtype="<f4").reshape(ref_logits(name).shape)
    assert np.abs(got - ref_logits(name)).max() < 1e-4
