#!/usr/bin/env python3
"""make_fidelity_ref.py: the compact HF reference for tests/py/test_demo_fidelity.py.

The demo model's HF logits over the 1,100 held-out tokens are 36 MB of float32, too much to
commit, so the test keeps what `lily ppl` is judged on, per position: HF's top-1 id, the gap
between its top two logits (positions closer than 1e-3 are ties either side may break), and the
negative log-likelihood of the next token; plus HF's perplexity. Regenerate whenever
models/demo changes (needs torch + transformers: the GPU machine or /work/venv-ref):

    python tools/hf_ref_logits.py --model models/demo --tokens tests/fixtures/demo-fidelity/ids.txt \\
        --out /tmp/demo_ref.f32 --dtype fp32 --device cpu
    python tools/demo/make_fidelity_ref.py --model models/demo \\
        --tokens tests/fixtures/demo-fidelity/ids.txt --logits /tmp/demo_ref.f32 \\
        --out tests/fixtures/demo-fidelity/hf_ref.json
"""
import argparse
import hashlib
import json
import os
import re

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--logits", required=True, help="float32 [n, vocab] from hf_ref_logits.py")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ids = [int(t) for t in re.split(r"[,\s]+", open(args.tokens).read()) if t]
    cfg = json.load(open(os.path.join(args.model, "config.json")))
    vocab = cfg.get("text_config", cfg)["vocab_size"]
    lg = np.fromfile(args.logits, dtype="<f4").reshape(len(ids), vocab).astype(np.float64)
    top2 = np.sort(lg, axis=1)[:, -2:]
    m = lg.max(axis=1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(lg - m).sum(axis=1)))
    nll = [float(lse[i] - lg[i, ids[i + 1]]) for i in range(len(ids) - 1)]
    with open(os.path.join(args.model, "model.safetensors"), "rb") as f:
        weights_sha = hashlib.sha256(f.read()).hexdigest()
    out = {
        "about": "HF transformers Qwen3_5MoeForCausalLM, fp32, on the dequantised 4-bit weights of "
                 "models/demo (tools/hf_ref_logits.py --dtype fp32); made by tools/demo/make_fidelity_ref.py",
        "model_sha256": weights_sha,
        "tokens": len(ids),
        "ppl": float(np.exp(np.mean(nll))),
        "top1": [int(x) for x in lg.argmax(axis=1)],
        "margin": [round(float(x), 6) for x in (top2[:, 1] - top2[:, 0])],
        "nll": [round(x, 7) for x in nll],
    }
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{args.out}: {len(ids)} positions, HF ppl {out['ppl']:.6f}")


if __name__ == "__main__":
    main()
