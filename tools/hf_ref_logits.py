#!/usr/bin/env python3
"""hf_ref_logits.py: reference logits of a Lily checkpoint from HF transformers, for `lily ppl`.

Loads any checkpoint directory Lily accepts (official HF layout, plain Qwen3_5MoeForCausalLM
layout, or an MLX affine 4/8-bit conversion; spec §3) into transformers' Qwen3_5MoeForCausalLM and
writes float32 logits [n, vocab] (little-endian, no header) for a token file, the format
`lily logits` writes and `lily ppl --ref-logits` reads:

    python tools/hf_ref_logits.py --model DIR --tokens ids.txt --out ref.f32 [--dtype bf16|fp32]
    lily ppl --backend cuda --model DIR --tokens ids.txt --ref-logits ref.f32

Needs torch and transformers 5.x (with Qwen3_5MoeForCausalLM) and safetensors; runs on the GPU
machine for full-size models (--device cuda, the default when CUDA is there) and on the CPU for
the tiny test fixtures (tests/py/test_bench_ppl.py runs it when torch is importable).

Precision, stated once here and printed with every run:
  - --dtype bf16 (default; the only choice that fits a 35B model on one H200: 35B x 2 bytes
    = ~70 GB, no layer streaming needed): every matrix (projections, experts, router, embedding,
    lm_head) is held in bf16. For a bf16 checkpoint that is exact. For an MLX affine checkpoint each
    weight is dequantised in fp32 as w = s * q + b (s, b the stored bf16 scale and bias) and then
    rounded once to bf16 (round to nearest even), so a reference weight differs from the value the
    engine uses by at most half a bf16 ulp (relative 2^-9). 1-D parameters (norm gains, A_log,
    dt_bias) stay in fp32: HF reads them through .float() anyway. Activations follow HF's own bf16
    forward (fp32 norms, softmax, GDN decay). The final projection is recomputed in fp32 from the
    bf16 final hidden state and the lm_head weights (the same bf16 values), so the logits carry no
    extra bf16 rounding of their own.
  - --dtype fp32: everything in fp32 (tiny models; exactly what tests/reference/make_fixtures.py
    does for the fixtures).

Layout conversions done here (spec §3.3): MLX names language_model.model.* -> model.*,
language_model.lm_head -> lm_head; switch_mlp.{gate,up}_proj [E, I, H] concatenated into
experts.gate_up_proj [E, 2I, H]; conv1d [C, K, 1] -> [C, 1, K]; when the conv layout says the
checkpoint was converted (last dim 1), the +1 folded into the zero-centred norms (input/post
layernorm, final norm, q_norm, k_norm) is taken out again, since HF adds it at run time.
Vision and MTP tensors are skipped.
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
import torch
from safetensors import safe_open

ZC_NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight",
            "k_norm.weight")
SKIP = ("model.visual.", "visual.", "vision_tower.", "mtp.", "model.mtp.", "language_model.mtp.")


# ------------------------------------------------------------------------------------------------
# Checkpoint reading.
def read_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        top = json.load(f)
    text = dict(top.get("text_config", top))
    quant = top.get("quantization") or top.get("quantization_config") or {}
    return top, text, quant


def shard_files(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(model_dir, f) for f in files]
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        return [single]
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not files:
        sys.exit(f"{model_dir}: no safetensors files")
    return [os.path.join(model_dir, f) for f in files]


def hf_name(name):
    """Checkpoint name -> Qwen3_5MoeForCausalLM state-dict name, or None to skip."""
    if name.startswith(SKIP):
        return None
    for pre, rep in (("model.language_model.", "model."), ("language_model.model.", "model."),
                     ("language_model.lm_head.", "lm_head.")):
        if name.startswith(pre):
            return rep + name[len(pre):]
    if name.startswith(("model.", "lm_head.")):
        return name
    return None


def dequantise(w, scales, biases, group, bits_cfg, name):
    """MLX affine: w = s * q + b per group of `group` inputs, codes a little-endian bit stream per
    row. Computed in fp32 on the tensor's device; returns fp32 [..., out, in]."""
    lead = w.shape[:-1]
    ng = scales.shape[-1]
    cols = ng * group
    words = w.shape[-1]
    if (32 * words) % cols:
        sys.exit(f"{name}: packed width {words} words does not fit {cols} inputs")
    bits = 32 * words // cols
    if bits_cfg and bits != bits_cfg:
        sys.exit(f"{name}: shapes say {bits} bits, config says {bits_cfg}")
    rows = int(np.prod(lead)) if lead else 1
    wb = w.reshape(rows, words).view(torch.uint8).to(torch.int32)  # little-endian bytes
    wb = torch.cat([wb, torch.zeros(rows, 1, dtype=torch.int32, device=w.device)], dim=1)
    s = scales.reshape(rows, ng).float()
    b = biases.reshape(rows, ng).float()
    out = torch.empty(rows, cols, dtype=torch.float32, device=w.device)
    j = torch.arange(cols, device=w.device)
    byte, shift = (j * bits) // 8, (j * bits) % 8
    mask = (1 << bits) - 1
    step = max(1, (1 << 24) // cols)  # bound the int32 temporaries to ~16M elements
    for r0 in range(0, rows, step):
        blk = wb[r0:r0 + step]
        v = blk[:, byte] | (blk[:, byte + 1] << 8)
        q = ((v >> shift) & mask).float().reshape(-1, ng, group)
        deq = s[r0:r0 + step, :, None] * q + b[r0:r0 + step, :, None]
        out[r0:r0 + step] = deq.reshape(-1, cols)
    return out.reshape(*lead, cols)


def quant_entry(quant, ckpt_base):
    """(group, bits) of a quantised module: its per-path entry, else the global values."""
    e = quant.get(ckpt_base)
    if isinstance(e, dict):
        return e.get("group_size", quant.get("group_size", 64)), e.get("bits", quant.get("bits"))
    return quant.get("group_size", 64), quant.get("bits")


def iter_checkpoint(model_dir, quant, device):
    """Yield (hf_name, fp32 tensor on `device`) for every text-decoder tensor, dequantised."""
    for path in shard_files(model_dir):
        with safe_open(path, framework="pt", device="cpu") as f:
            keys = set(f.keys())
            for k in sorted(keys):
                if k.endswith((".scales", ".biases")):
                    continue
                name = hf_name(k)
                if name is None:
                    continue
                base = k[: -len(".weight")] if k.endswith(".weight") else k
                if base + ".scales" in keys:
                    if base + ".biases" not in keys:
                        sys.exit(f"{path}: {base}.scales without {base}.biases")
                    group, bits = quant_entry(quant, base)
                    t = dequantise(f.get_tensor(k).to(device), f.get_tensor(base + ".scales").to(device),
                                   f.get_tensor(base + ".biases").to(device), group, bits, k)
                else:
                    t = f.get_tensor(k).to(device).float()
                yield name, t


# ------------------------------------------------------------------------------------------------
# Model.
def build_model(text_cfg, dtype, device, attn):
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    drop = {"quantization", "quantization_config", "architectures", "model_type", "dtype",
            "torch_dtype", "transformers_version"}
    cfg = Qwen3_5MoeTextConfig(**{k: v for k, v in text_cfg.items() if k not in drop})
    cfg._attn_implementation = attn
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen3_5MoeForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    # 1-D parameters (norm gains, A_log, dt_bias) in fp32: HF reads them through .float().
    for p in model.parameters():
        if p.dim() == 1:
            p.data = p.data.float()
    return model.eval(), cfg


def load_weights(model, cfg, model_dir, quant, device):
    params = dict(model.named_parameters())
    done = {}  # name -> set of filled parts
    I = cfg.moe_intermediate_size
    # The conv layout tells whether the +1 of the zero-centred norms is folded in (spec §3.3).
    shifted = None
    pending_norms = []
    for name, t in iter_checkpoint(model_dir, quant, device):
        if name.endswith("linear_attn.conv1d.weight"):
            if t.dim() == 3 and t.shape[-1] == 1 and t.shape[1] > 1:  # MLX [C, K, 1]
                t = t.permute(0, 2, 1)
                shifted = True
            elif shifted is None:
                shifted = False
        if name.endswith(ZC_NORMS) or name == "model.norm.weight":
            pending_norms.append((name, t))
            continue
        m = re.match(r"(.*\.mlp)\.switch_mlp\.(gate|up|down)_proj\.weight$", name)
        m2 = re.match(r"(.*\.mlp)\.experts\.(\d+)\.(gate|up|down)_proj\.weight$", name)
        if m:
            part = m.group(2)
            pname = m.group(1) + (".experts.down_proj" if part == "down" else ".experts.gate_up_proj")
            dst = params.get(pname)
            if dst is None:
                sys.exit(f"{name}: no parameter {pname}")
            view = dst.data if part == "down" else (dst.data[:, :I] if part == "gate" else dst.data[:, I:])
            put(view, t, name)
            done.setdefault(pname, set()).add(part)
            continue
        if m2:
            e, part = int(m2.group(2)), m2.group(3)
            pname = m2.group(1) + (".experts.down_proj" if part == "down" else ".experts.gate_up_proj")
            dst = params[pname].data[e]
            view = dst if part == "down" else (dst[:I] if part == "gate" else dst[I:])
            put(view, t, name)
            done.setdefault(pname, set()).add((e, part))
            continue
        if name not in params:
            sys.exit(f"{name}: not a parameter of Qwen3_5MoeForCausalLM")
        put(params[name].data, t, name)
        done.setdefault(name, set()).add("all")
    for name, t in pending_norms:
        if name not in params:
            sys.exit(f"{name}: not a parameter of Qwen3_5MoeForCausalLM")
        put(params[name].data, t - 1.0 if shifted else t, name)
        done.setdefault(name, set()).add("all")
    missing = []
    for pname in params:
        parts = done.get(pname, set())
        if pname.endswith("experts.gate_up_proj"):
            ok = {"gate", "up"} <= parts or "all" in parts or len(parts) == 2 * cfg.num_experts
        elif pname.endswith("experts.down_proj"):
            ok = "down" in parts or "all" in parts or len(parts) == cfg.num_experts
        else:
            ok = "all" in parts
        if not ok:
            missing.append(pname)
    if missing:
        sys.exit(f"{model_dir}: no weights for {len(missing)} parameters, e.g. {missing[:4]}")
    if "lm_head.weight" not in done and getattr(cfg, "tie_word_embeddings", False):
        model.lm_head.weight = model.model.embed_tokens.weight
    return bool(shifted)


def put(dst, t, name):
    if tuple(dst.shape) != tuple(t.shape):
        sys.exit(f"{name}: checkpoint shape {tuple(t.shape)}, model expects {tuple(dst.shape)}")
    dst.copy_(t.to(dst.dtype))  # the one rounding to the model dtype (round to nearest even)


def read_ids(path, vocab):
    with open(path) as f:
        text = f.read()
    toks = [t for t in re.split(r"[,\s]+", text) if t]
    try:
        ids = [int(t) for t in toks]
    except ValueError as e:
        sys.exit(f"{path}: {e}")
    if not ids:
        sys.exit(f"{path}: no token ids")
    bad = [i for i in ids if not 0 <= i < vocab]
    if bad:
        sys.exit(f"{path}: token id {bad[0]} outside the vocabulary [0, {vocab})")
    return ids


# ------------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint directory (HF or MLX layout)")
    ap.add_argument("--tokens", required=True, help="token ids, separated by commas or white space")
    ap.add_argument("--out", required=True, help="float32 [n, vocab] output file")
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--attn", default="sdpa", help="HF attention implementation (eager, sdpa)")
    ap.add_argument("--head-rows", type=int, default=512, help="positions per fp32 lm_head block")
    args = ap.parse_args()

    t0 = time.time()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    top, text_cfg, quant = read_config(args.model)
    torch.manual_seed(0)
    model, cfg = build_model(text_cfg, dtype, args.device, args.attn)
    with torch.no_grad():
        shifted = load_weights(model, cfg, args.model, quant, args.device)
    ids = read_ids(args.tokens, cfg.vocab_size)
    quantised = bool(quant)
    print(f"hf_ref_logits: {args.model}: {'MLX affine, dequantised' if quantised else 'dense'}"
          f"{', norms unshifted' if shifted else ''}; matrices in {args.dtype}"
          f"{' (dequantised values rounded once to bf16)' if quantised and args.dtype == 'bf16' else ''}"
          f", 1-D params fp32, lm_head product in fp32; {len(ids)} tokens on {args.device}; "
          f"loaded in {time.time() - t0:.1f} s", flush=True)

    t1 = time.time()
    x = torch.tensor([ids], device=args.device)
    with torch.no_grad(), open(args.out, "wb") as f:
        hidden = model.model(input_ids=x, use_cache=False).last_hidden_state[0]
        W = model.lm_head.weight.float()  # same values; the product accumulates in fp32
        for r0 in range(0, len(ids), args.head_rows):
            logits = hidden[r0:r0 + args.head_rows].float() @ W.t()
            f.write(logits.cpu().numpy().astype("<f4").tobytes())
    print(f"hf_ref_logits: wrote {args.out} [{len(ids)} x {cfg.vocab_size}] float32 in "
          f"{time.time() - t1:.1f} s", flush=True)


if __name__ == "__main__":
    main()
