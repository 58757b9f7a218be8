"""test_template.py: `lily prompt` against the jinja2 reference (tools/render_template_ref.py) on the
conversations of template_cases.py and on random ones, for the Qwen3.5 and Qwen3.6 templates;
byte equality required. Also: the golden fixtures are up to date, and refused requests exit 1 with
one line on stderr. Run: .venv/bin/python -m pytest -q tests/py/test_template.py
"""
import json
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_template_ref as ref  # noqa: E402
from template_cases import CASES, ERROR_CASES, rrequest  # noqa: E402

LILY = os.environ.get("LILY_BIN", os.path.join(ROOT, "build", "lily"))
TDIR = os.path.join(ROOT, "tests", "fixtures", "templates")
VARIANTS = ("qwen3.5", "qwen3.6")


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    dirs = {}
    for v in VARIANTS:
        d = tmp_path_factory.mktemp(v)
        with open(os.path.join(TDIR, v + ".jinja"), encoding="utf-8") as f:
            text = f.read()
        (d / "chat_template.jinja").write_text(text, encoding="utf-8")
        dirs[v] = (str(d), text)
    return dirs


def lily_prompt(model_dir, req, tmp_path):
    p = tmp_path / "req.json"
    p.write_text(json.dumps(req, ensure_ascii=False), encoding="utf-8")
    return subprocess.run([LILY, "prompt", "--model", model_dir, "--request", str(p)],
                          capture_output=True)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_reference(name, variant, model_dirs, tmp_path):
    d, text = model_dirs[variant]
    want = ref.render(text, CASES[name]).encode("utf-8")
    r = lily_prompt(d, CASES[name], tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == want
    with open(os.path.join(TDIR, "cases", f"{name}.{variant}.txt"), "rb") as f:
        assert f.read() == want, "golden fixture stale: run tools/render_template_ref.py --write-cases"


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_error_case(name, model_dirs, tmp_path):
    r = lily_prompt(model_dirs["qwen3.5"][0], ERROR_CASES[name], tmp_path)
    assert r.returncode == 1
    assert r.stdout == b""
    assert len(r.stderr.decode().strip().splitlines()) == 1


def test_template_raises_agree(model_dirs, tmp_path):
    # Where the template itself raises, the reference must raise too (the cases are honest).
    d, text = model_dirs["qwen3.5"]
    for name in ("system_not_first", "unknown_role", "developer_role", "no_user_query",
                 "no_messages", "content_number", "audio_part", "args_invalid_json"):
        with pytest.raises(ref.RenderError):
            ref.render(text, ERROR_CASES[name])


def test_preserve_thinking_differs_only_in_36(model_dirs):
    req = CASES["preserve_thinking_true"]
    r35 = ref.render(model_dirs["qwen3.5"][1], req)
    r36 = ref.render(model_dirs["qwen3.6"][1], req)
    assert "<think>\nr1\n</think>" not in r35 and "<think>\nr1\n</think>" in r36


# ----------------------------------------------------------------------------------------------
# Random conversations: mixes of everything above, checked the same way.

@pytest.mark.parametrize("variant", VARIANTS)
def test_random_conversations(variant, model_dirs, tmp_path):
    d, text = model_dirs[variant]
    rng = random.Random(1234 if variant == "qwen3.5" else 5678)
    n_ok = 0
    for i in range(150):
        req = rrequest(rng)
        try:
            want = ref.render(text, req).encode("utf-8")
        except ref.RenderError:
            want = None
        r = lily_prompt(d, req, tmp_path)
        if want is None:
            assert r.returncode == 1, f"case {i}: reference refused, Lily rendered: {json.dumps(req)}"
        else:
            assert r.returncode == 0, f"case {i}: {r.stderr.decode()} {json.dumps(req)}"
            assert r.stdout == want, f"case {i}: {json.dumps(req, ensure_ascii=False)}"
            n_ok += 1
    assert n_ok > 100
