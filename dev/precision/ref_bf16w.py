#!/usr/bin/env python3
"""ref_bf16w.py: the HF reference for the prefill GEMM on bf16-rounded weights (LILY_CUDA_QG_BF16W).

HF transformers in fp32 on the CPU (tools/hf_ref_logits.py's loader), with every 4-bit matrix the
wgmma GEMM can read rounded once to bf16, as that GEMM's dequantisation does (w = rb(s q + b)): the
linear projections, the experts and the lm_head; not the 8-bit router and shared-expert gates, not
the embedding (a lookup, exact in Lily), not the conv or the 1-D parameters. Writes float32
[n, vocab] logits of the fixture's ids.txt, the file `lily-gpu-test fixtures` reads from
tests/gpu/hf_bf16w/NAME.f32 (its "bf16 weights" rows).

    /work/venv-ref/bin/python dev/precision/ref_bf16w.py tests/fixtures/models/mlx-4bit tests/gpu/hf_bf16w/mlx-4bit.f32
"""
import sys

import numpy as np
import torch

sys.path.insert(0, "tools")
import hf_ref_logits as h  # noqa: E402

SKIP = ("embed_tokens", "mlp.gate.weight", "shared_expert_gate", "conv1d")


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    top, text_cfg, quant = h.read_config(model_dir)
    if not quant or quant.get("bits") != 4:
        sys.exit(f"{model_dir}: not a 4-bit checkpoint; the bf16-weight GEMM does not apply")
    torch.manual_seed(0)
    model, cfg = h.build_model(text_cfg, torch.float32, "cpu", "sdpa")
    rounded = []
    with torch.no_grad():
        h.load_weights(model, cfg, model_dir, quant, "cpu")
        for name, p in model.named_parameters():
            if p.dim() >= 2 and not any(s in name for s in SKIP):
                p.copy_(p.to(torch.bfloat16).float())
                rounded.append(name)
        ids = h.read_ids(model_dir + "/ids.txt", cfg.vocab_size)
        hid = model.model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0]
        logits = (hid @ model.lm_head.weight.t()).numpy().astype("<f4")
    logits.tofile(out)
    kinds = sorted({n.split(".")[-2] if n.endswith("weight") else n.split(".")[-1] for n in rounded})
    print(f"{out}: {logits.shape[0]} x {logits.shape[1]} logits; {len(rounded)} matrices rounded ({', '.join(kinds)})")


if __name__ == "__main__":
    main()
