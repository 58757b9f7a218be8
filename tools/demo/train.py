#!/usr/bin/env python3
"""train.py: train Lily's small demo model, a Qwen3_5MoeForCausalLM that keeps every feature of the
real Qwen3.5/3.6 MoE (issue 9).

The model is HF transformers' own Qwen3_5MoeForCausalLM with a small config: Gated DeltaNet and
gated full-attention layers in the 3:1 pattern, 16 routed experts top-4 plus a shared expert, GQA,
partial RoPE (25 %), QK norm, untied embeddings, vocab 8192 (tools/demo/train_tokenizer.py).

A run trains for at most --minutes (wall clock, so it fits one GPU-machine call), then saves a
resume point in --out: the weights in bf16 as safetensors parts of < 16 MiB each (weights-NNNNN of
state.json's list) plus state.json (step, data position, the loss history). --resume DIR continues
from such a point; the AdamW moments are rebuilt (a short re-warmup of the LR covers that).
Validation loss is computed every --eval-every steps and at the end; the curve is written to
OUT/curve.csv and printed as a table.

    python3 tools/demo/train.py --data tools/demo/data --out runs/r1 [--minutes 9.5]
    python3 tools/demo/train.py --data tools/demo/data --out runs/r2 --resume runs/r1 [--final]
    python3 tools/demo/train.py --export models/demo-bf16 --resume runs/r2   # Lily-loadable HF dir
    python3 tools/demo/train.py --size                                      # params, 4-bit size

--preset tiny is a very small model for CPU smoke tests. Data: DIR/train.bin and DIR/valid.bin,
little-endian uint16 token ids with <|endoftext|> between documents (train_tokenizer.py).
"""

import argparse
import csv
import json
import math
import os
import shutil
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no hub kernels: the machines have no network
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PART_BYTES = 15 * 1024 * 1024  # parts stay under 16 MiB (the GPU machine's per-file return limit)

# Token ids fixed by the tokenizer (8192 ids, the 9 added tokens last; train_tokenizer.py).
VOCAB = 8192
EOT_ID, IM_START_ID, IM_END_ID = 8183, 8184, 8185

PRESETS = {
    # The shipped demo model: ~20M parameters, ~11.7 MB at 4-bit (g64, router 8-bit), bf16 resume
    # point ~41 MB so that it and the tokenized corpus travel to the GPU machine together.
    "demo": dict(hidden_size=256, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=64, linear_value_head_dim=64, num_experts=16,
                 num_experts_per_tok=4, moe_intermediate_size=128, shared_expert_intermediate_size=256),
    # CPU smoke tests: same structure, a few hundred thousand parameters outside the embeddings.
    "tiny": dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
                 head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=32, linear_value_head_dim=32, num_experts=16,
                 num_experts_per_tok=4, moe_intermediate_size=64, shared_expert_intermediate_size=64),
}


def log(*a):
    print(*a, flush=True)


def make_config(preset):
    p = dict(PRESETS[preset])
    n = p["num_hidden_layers"]
    return Qwen3_5MoeTextConfig(
        vocab_size=VOCAB, max_position_embeddings=4096, rms_norm_eps=1e-6, hidden_act="silu",
        tie_word_embeddings=False, attention_bias=False, linear_conv_kernel_dim=4,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)],
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        router_aux_loss_coef=0.01, output_router_logits=True, initializer_range=0.02,
        bos_token_id=EOT_ID, eos_token_id=EOT_ID, pad_token_id=None, use_cache=False, **p)


# --------------------------------------------------------------------------------------------
# Size accounting: parameters, and the bytes of the MLX-style 4-bit checkpoint that `lily quantize`
# writes (2-D weights whose input dim is a multiple of 64 at 4 bits with bf16 scale and bias per
# group of 64; the router and shared-expert gate at 8 bits as mlx-lm does; the rest bf16).

def size_report(model):
    n_total, q_bytes, bf16_bytes = 0, 0, 0
    for name, t in model.state_dict().items():
        n = t.numel()
        n_total += n
        bf16_bytes += 2 * n
        cols = t.shape[-1]
        if t.dim() >= 2 and cols % 64 == 0 and "conv1d" not in name:
            bits = 8 if (name.endswith("mlp.gate.weight") or "shared_expert_gate" in name) else 4
            q_bytes += n * bits // 8 + (n // 64) * 4
        else:
            q_bytes += 4 * n if "A_log" in name else 2 * n
    return n_total, q_bytes, bf16_bytes


def active_params(cfg):
    # Matmul parameters touched per token (for the 6*N*T FLOP estimate).
    h, i, e, k = cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts, cfg.num_experts_per_tok
    kd = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    vd = cfg.linear_num_value_heads * cfg.linear_value_head_dim
    gdn = h * (2 * kd + vd) + h * vd + 2 * h * cfg.linear_num_value_heads + vd * h
    qd = cfg.num_attention_heads * cfg.head_dim
    att = h * 2 * qd + 2 * h * cfg.num_key_value_heads * cfg.head_dim + qd * h
    moe = h * e + 3 * h * i * k + 3 * h * cfg.shared_expert_intermediate_size + h
    n = 0
    for t in cfg.layer_types:
        n += (gdn if t == "linear_attention" else att) + moe
    return n + h * cfg.vocab_size


# --------------------------------------------------------------------------------------------
# Data: the train set is cut into non-overlapping windows of seq+1 tokens, visited in a fresh
# permutation each epoch (seeded by the epoch number), so (epoch, index) is the whole position.

class Batches:
    def __init__(self, path, seq, batch, seed):
        self.tok = np.fromfile(path, dtype=np.uint16)
        self.seq, self.batch, self.seed = seq, batch, seed
        self.n_win = (len(self.tok) - 1) // seq
        if self.n_win < batch:
            raise SystemExit(f"{path}: {len(self.tok)} tokens, too few for a batch of {batch}x{seq}")
        self.epoch, self.index = 0, 0
        self._perm()

    def _perm(self):
        self.perm = np.random.default_rng(self.seed + self.epoch).permutation(self.n_win)

    def position(self):
        return {"epoch": self.epoch, "index": self.index}

    def seek(self, pos):
        self.epoch, self.index = pos["epoch"], pos["index"]
        self._perm()

    def next(self):
        if self.index + self.batch > self.n_win:
            self.epoch, self.index = self.epoch + 1, 0
            self._perm()
        w = self.perm[self.index:self.index + self.batch]
        self.index += self.batch
        x = np.stack([self.tok[j * self.seq: j * self.seq + self.seq + 1] for j in w]).astype(np.int64)
        return torch.from_numpy(x)


def valid_windows(path, seq, max_windows):
    tok = np.fromfile(path, dtype=np.uint16)
    n = min(max_windows, (len(tok) - 1) // seq)
    return torch.from_numpy(np.stack([tok[j * seq: j * seq + seq + 1] for j in range(n)]).astype(np.int64))


# --------------------------------------------------------------------------------------------

def lm_loss(model, x, dev, amp):
    x = x.to(dev, non_blocking=True)
    with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
        out = model(input_ids=x[:, :-1], output_router_logits=True)
    logits = out.logits.float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    aux = out.aux_loss if out.aux_loss is not None else torch.zeros((), device=dev)
    return ce, aux


@torch.no_grad()
def evaluate(model, vx, bs, dev, amp):
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(vx), bs):
        ce, _ = lm_loss(model, vx[i:i + bs], dev, amp)
        tot += ce.item() * len(vx[i:i + bs])
        n += len(vx[i:i + bs])
    model.train()
    return tot / max(1, n)


def save_point(model, out, state):
    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in model.state_dict().items()}
    parts, cur, cur_bytes = [], {}, 0
    for k in sorted(sd):
        nb = sd[k].numel() * 2
        if cur and cur_bytes + nb > PART_BYTES:
            parts.append(cur)
            cur, cur_bytes = {}, 0
        cur[k] = sd[k]
        cur_bytes += nb
    if cur:
        parts.append(cur)
    for f in os.listdir(out):
        if f.startswith("weights-") and f.endswith(".safetensors"):
            os.remove(os.path.join(out, f))
    names = []
    for i, p in enumerate(parts):
        name = f"weights-{i:05d}.safetensors"
        save_file(p, os.path.join(out, name))
        names.append(name)
    state["parts"] = names
    with open(os.path.join(out, "state.json"), "w") as f:
        json.dump(state, f, indent=1)


def load_point(model, d):
    state = json.load(open(os.path.join(d, "state.json")))
    sd = {}
    for name in state["parts"]:
        sd.update(load_file(os.path.join(d, name)))
    own = model.state_dict()
    missing = set(own) - set(sd)
    if missing:
        raise SystemExit(f"{d}: resume point lacks {sorted(missing)[:4]}")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in sd.items()})
    return state


def write_curve(out, hist):
    with open(os.path.join(out, "curve.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "train_loss", "valid_loss", "lr", "elapsed_s"])
        for h in hist:
            w.writerow([h["step"], h["tokens"], f"{h['train_loss']:.4f}",
                        "" if h.get("valid_loss") is None else f"{h['valid_loss']:.4f}",
                        f"{h['lr']:.3e}", f"{h['elapsed_s']:.1f}"])
    log(f"{'step':>7} {'tokens':>12} {'train':>7} {'valid':>7} {'lr':>9}")
    for h in hist:
        if h.get("valid_loss") is not None:
            log(f"{h['step']:>7} {h['tokens']:>12} {h['train_loss']:7.3f} {h['valid_loss']:7.3f} {h['lr']:9.2e}")


def export(model, cfg, out, ref_x):
    """Write an HF checkpoint in the plain Qwen3_5MoeForCausalLM layout (model.*, lm_head) that
    Lily's loader reads and `lily quantize` converts; check it reloads with HF to the same logits."""
    os.makedirs(out, exist_ok=True)
    sd = {}
    for k, v in model.state_dict().items():
        sd[k] = v.detach().float().cpu().contiguous() if k.endswith("A_log") else \
            v.detach().to(torch.bfloat16).cpu().contiguous()
    save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    c = cfg.to_dict()
    c.update({"architectures": ["Qwen3_5MoeForCausalLM"], "dtype": "bfloat16", "use_cache": True,
              "output_router_logits": False, "eos_token_id": EOT_ID, "bos_token_id": EOT_ID,
              # Also at top level, where some loaders look (spec §1.2).
              "partial_rotary_factor": 0.25, "full_attention_interval": 4})
    for k in ("id2label", "label2id", "_name_or_path", "chunk_size_feed_forward", "problem_type",
              "is_encoder_decoder", "output_attentions", "output_hidden_states", "return_dict"):
        c.pop(k, None)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": EOT_ID, "eos_token_id": [IM_END_ID, EOT_ID], "do_sample": True,
                   "temperature": 0.7, "top_p": 0.8, "top_k": 20}, f, indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        src = os.path.join(ROOT, "models", "demo", name)
        if os.path.exists(src) and os.path.abspath(os.path.dirname(src)) != os.path.abspath(out):
            shutil.copyfile(src, os.path.join(out, name))
    # Reload with HF from the files alone, in fp32, and compare with the in-memory model holding the
    # same (rounded) values: any name, layout or config mistake shows as a large difference.
    re_m, info = Qwen3_5MoeForCausalLM.from_pretrained(out, dtype=torch.float32, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise SystemExit(f"export: HF reload reports {bad}")
    ref = model.float().eval()
    ref.load_state_dict({k: v.float() for k, v in sd.items()})
    re_m.eval()
    with torch.no_grad():
        a = ref(input_ids=ref_x).logits
        b = re_m(input_ids=ref_x).logits
    diff = (a - b).abs().max().item()
    log(f"exported {out}: {len(sd)} tensors; HF reload max |logit diff| = {diff:.3g}")
    if diff > 1e-4:
        raise SystemExit("export does not reload to the same model")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--out", help="resume point to write")
    ap.add_argument("--resume", help="resume point to continue from")
    ap.add_argument("--export", help="write a Lily-loadable HF checkpoint (with --resume) and stop")
    ap.add_argument("--size", action="store_true", help="print the parameter count and sizes, stop")
    ap.add_argument("--preset", default="demo", choices=sorted(PRESETS))
    ap.add_argument("--minutes", type=float, default=9.5, help="wall-clock budget of this run")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps in total")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=200, help="LR warm-up steps (also after a resume)")
    ap.add_argument("--final", action="store_true",
                    help="last run: decay the LR linearly to min-lr-frac over this run's minutes")
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch default)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (GPU)")
    ap.add_argument("--keep-best", action="store_true",
                    help="save the weights of this run's best validation loss, not the last ones")
    args = ap.parse_args()

    t_start = time.time()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp = dev.type == "cuda"
    if amp:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    cfg = make_config(args.preset)
    if args.resume and os.path.exists(os.path.join(args.resume, "state.json")):
        st = json.load(open(os.path.join(args.resume, "state.json")))
        if st.get("preset", args.preset) != args.preset:
            log(f"resume point was trained with --preset {st['preset']}: using it")
            args.preset = st["preset"]
            cfg = make_config(args.preset)
    model = Qwen3_5MoeForCausalLM(cfg)  # fp32 master weights; bf16 autocast on CUDA
    n_par, q_bytes, bf_bytes = size_report(model)
    n_act = active_params(cfg)
    log(f"preset {args.preset}: {n_par / 1e6:.2f}M parameters ({n_act / 1e6:.2f}M active per token), "
        f"4-bit checkpoint {q_bytes / 1e6:.2f} MB, bf16 {bf_bytes / 1e6:.2f} MB; "
        f"layers {''.join('L' if t == 'linear_attention' else 'A' for t in cfg.layer_types)}")
    if args.size:
        return

    state = {"step": 0, "tokens": 0, "history": [], "data": None, "preset": args.preset, "runs": []}
    if args.resume:
        state = load_point(model, args.resume)
        log(f"resumed from {args.resume}: step {state['step']}, {state['tokens']} tokens")

    if args.export:
        vx = valid_windows(os.path.join(args.data, "valid.bin"), 64, 2) \
            if os.path.exists(os.path.join(args.data, "valid.bin")) else torch.randint(0, VOCAB, (2, 65))
        export(model, cfg, args.export, vx[:, :64])
        return
    if not args.out:
        raise SystemExit("--out is required to train")

    model.to(dev).train()
    fwd_model = torch.compile(model) if args.compile else model
    train = Batches(os.path.join(args.data, "train.bin"), args.seq, args.batch, args.seed)
    if state.get("data"):
        train.seek(state["data"])
    vx = valid_windows(os.path.join(args.data, "valid.bin"), args.seq, args.eval_windows)
    log(f"train {len(train.tok)} tokens ({train.n_win} windows of {args.seq}), valid {len(vx)} windows; "
        f"device {dev}, batch {args.batch}x{args.seq}")

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")

    budget = args.minutes * 60.0
    hist = state["history"]
    step0, run_step = state["step"], 0
    t_run = time.time()
    tok_run = 0
    last_eval = None
    loss_acc, aux_acc, n_acc = 0.0, 0.0, 0
    best = None  # (valid loss, step, tokens, CPU copy of the weights) for --keep-best
    while True:
        elapsed = time.time() - t_start
        # Leave room for the final evaluation and save (measured as one eval + margin).
        if elapsed > budget - (last_eval or 5.0) - 10.0 or (args.max_steps and state["step"] >= args.max_steps):
            break
        warm = min(1.0, (run_step + 1) / max(1, args.warmup))
        frac = 1.0
        if args.final:
            frac = max(args.min_lr_frac, 1.0 - elapsed / budget)
        lr = args.lr * warm * frac
        for g in opt.param_groups:
            g["lr"] = lr
        x = train.next()
        if args.compile:
            x = x.to(dev)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                out = fwd_model(input_ids=x[:, :-1], output_router_logits=True)
            ce = F.cross_entropy(out.logits.float().reshape(-1, VOCAB), x[:, 1:].reshape(-1))
            aux = out.aux_loss
        else:
            ce, aux = lm_loss(fwd_model, x, dev, amp)
        loss = ce + cfg.router_aux_loss_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] += 1
        run_step += 1
        state["tokens"] += x.shape[0] * args.seq
        tok_run += x.shape[0] * args.seq
        loss_acc += ce.item() if (run_step % args.log_every == 0) else 0.0
        if run_step % args.log_every == 0:
            aux_acc = aux.item()
            dt = time.time() - t_run
            log(f"step {state['step']:6d}  loss {ce.item():.4f}  aux {aux_acc:.3f}  lr {lr:.2e}  "
                f"{tok_run / dt:,.0f} tok/s  {time.time() - t_start:.0f}s")
        if run_step % args.eval_every == 0:
            te = time.time()
            vl = evaluate(model, vx, args.batch, dev, amp)
            last_eval = time.time() - te
            hist.append({"step": state["step"], "tokens": state["tokens"], "train_loss": ce.item(),
                         "valid_loss": vl, "lr": lr, "elapsed_s": time.time() - t_start})
            log(f"step {state['step']:6d}  valid loss {vl:.4f}  (eval {last_eval:.1f}s)")
            if args.keep_best and (best is None or vl < best[0]):
                best = (vl, state["step"], state["tokens"],
                        {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()})
    dt = time.time() - t_run
    if hist and hist[-1]["step"] == state["step"]:
        vl = hist[-1]["valid_loss"]
    else:
        vl = evaluate(model, vx, args.batch, dev, amp)
        hist.append({"step": state["step"], "tokens": state["tokens"],
                     "train_loss": ce.item() if run_step else float("nan"),
                     "valid_loss": vl, "lr": lr if run_step else 0.0, "elapsed_s": time.time() - t_start})
    if best is not None and best[0] < vl:
        model.load_state_dict(best[3])
        log(f"keep-best: restoring step {best[1]} (valid loss {best[0]:.4f}) over the last ({vl:.4f})")
        state["best"] = {"step": best[1], "tokens": best[2], "valid_loss": best[0]}
        vl = best[0]
    state["data"] = train.position()
    state["history"] = hist
    state["runs"].append({"steps": [step0, state["step"]], "seconds": round(dt, 1),
                          "tokens_per_s": round(tok_run / max(dt, 1e-9)), "device": str(dev),
                          "batch": args.batch, "seq": args.seq, "lr": args.lr, "final": args.final})
    save_point(model, args.out, state)
    write_curve(args.out, hist)
    log(f"run: {run_step} steps, {tok_run} tokens in {dt:.0f}s = {tok_run / max(dt, 1e-9):,.0f} tok/s; "
        f"valid loss {vl:.4f}; saved {args.out} ({len(state['parts'])} parts) in {time.time() - t_start:.0f}s total")


if __name__ == "__main__":
    main()
