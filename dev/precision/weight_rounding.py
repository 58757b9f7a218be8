#!/usr/bin/env python3
"""weight_rounding.py: how far a checkpoint's logits move when only its matrices are rounded to bf16.

Runs HF transformers (tools/hf_ref_logits.py's loader) twice in fp32 on the CPU: with the exact
weights (w = s q + b for an MLX checkpoint), then with every matrix rounded once to bf16 (what
`LILY_CUDA_QG_BF16W=1` does in the prefill GEMM). Prints the per-position rel. L2 between the two,
and the router's top-k margin (logit gap between the k-th and (k+1)-th expert) per MoE layer at the
positions that moved most. A large move at a position with a small margin is the model's own
sensitivity (an expert choice flips), not an engine error.

    /work/venv-ref/bin/python dev/precision/weight_rounding.py tests/fixtures/models/mlx-4bit
"""
import sys

import numpy as np
import torch

sys.path.insert(0, "tools")
import hf_ref_logits as h  # noqa: E402


def run(model_dir, round_w):
    top, text_cfg, quant = h.read_config(model_dir)
    torch.manual_seed(0)
    model, cfg = h.build_model(text_cfg, torch.float32, "cpu", "sdpa")
    with torch.no_grad():
        h.load_weights(model, cfg, model_dir, quant, "cpu")
        if round_w:
            for _, p in model.named_parameters():
                if p.dim() >= 2:
                    p.copy_(p.to(torch.bfloat16).float())
    gates = {}
    for name, mod in model.named_modules():
        if name.endswith("mlp.gate"):
            mod.register_forward_hook(lambda m, i, o, name=name: gates.__setitem__(name, o[0].detach()))
    ids = h.read_ids(model_dir + "/ids.txt", cfg.vocab_size)
    with torch.no_grad():
        hid = model.model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0]
        logits = (hid @ model.lm_head.weight.t()).numpy()
    return logits, gates, text_cfg.get("num_experts_per_tok", 8)


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/models/mlx-4bit"
    a, gates, k = run(model_dir, False)
    b, gates_b, _ = run(model_dir, True)
    rl = np.linalg.norm(a - b, axis=1) / np.linalg.norm(a, axis=1)
    print(f"{model_dir}: bf16-rounded matrices vs exact, fp32 activations: rel_l2 mean {rl.mean():.3e} "
          f"worst {rl.max():.3e} (position {int(rl.argmax())})")
    print("per position:", " ".join(f"{v:.3f}" for v in rl[:16]), "..." if len(rl) > 16 else "")
    worst = np.argsort(-rl)[:4]
    for name, lg in gates.items():
        s = torch.sort(lg.reshape(-1, lg.shape[-1]).float(), dim=-1, descending=True).values
        gap = (s[:, k - 1] - s[:, k]).numpy()
        flips = [int(p) for p in worst
                 if set(torch.topk(lg[p], k).indices.tolist()) != set(torch.topk(gates_b[name][p], k).indices.tolist())]
        print(f"  {name}: top-{k} margin at the most-moved positions "
              + ", ".join(f"{int(p)}: {gap[p]:.4f}" for p in worst)
              + (f"; expert choice differs at {flips}" if flips else "; same experts there"))


if __name__ == "__main__":
    main()
