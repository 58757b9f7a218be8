#!/usr/bin/env python3
"""check_template_hf.py: one-off check that tools/render_template_ref.py (jinja2 only) renders
exactly what HF transformers' apply_chat_template renders, on the cases of
tests/py/template_cases.py and 2 x 300 random conversations, for both templates. Needs
transformers (not part of the CI venv):
    /work/venv-ref/bin/python tools/check_template_hf.py TOKENIZER_JSON
TOKENIZER_JSON: any HF tokenizer.json (the template is passed explicitly; e.g. the Qwen3 one).
"""
import json
import os
import random
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import render_template_ref as ref  # noqa: E402
from template_cases import CASES, ERROR_CASES, rrequest  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

tok = PreTrainedTokenizerFast(tokenizer_file=sys.argv[1])
n = 0
for v in ("qwen3.5", "qwen3.6"):
    with open(os.path.join(ROOT, "tests", "fixtures", "templates", v + ".jinja")) as f:
        text = f.read()
    rng = random.Random(99)
    reqs = list(CASES.values()) + list(ERROR_CASES.values()) + [rrequest(rng) for _ in range(300)]
    for req in reqs:
        try:
            want = ref.render(text, req)
        except ref.RenderError:
            want = None
        try:
            msgs = ref.template_messages(req["messages"])
            kw = req.get("chat_template_kwargs") or {}
            got = tok.apply_chat_template(msgs, tools=req.get("tools"), chat_template=text,
                                          tokenize=False, add_generation_prompt=True, **kw)
        except Exception:
            got = None
        if want is not None or got is not None:
            assert got == want, (v, json.dumps(req)[:300], repr(got)[:300], repr(want)[:300])
        n += 1
print(f"HF apply_chat_template agrees with the jinja2 reference on {n} requests")
