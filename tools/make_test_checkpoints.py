#!/usr/bin/env python3
"""make_test_checkpoints.py: small Qwen3.5-MoE checkpoints for the loader tests, written by hand
(json + struct + numpy; no safetensors package), with the values the loader must produce.

    python3 tools/make_test_checkpoints.py --out DIR

Writes DIR/<name>/ for each checkpoint below, and DIR/<name>/expect/ holding manifest.json plus one
raw little-endian float32 file per matrix or vector: what lily_mat_get / the fp32 arrays must read.
The expected values come from an independent numpy path written from the spec (qwen35moe.md §3):
quantised codes are drawn as integers, packed as a little-endian bit stream per row, and the
expectation is w = s*q + b from the integers, never from the packed bytes.

Checkpoints:
  hf_fused        model.language_model.* (multimodal config, text_config nested, layer_types),
                  bf16 with fp32 A_log, fused experts gate_up_proj/down_proj, plus vision and mtp
                  tensors that must be skipped; generation_config.json with extra eos ids.
  hf_text         model.* + lm_head.weight (flat config, full_attention_interval), per-expert
                  weights, mixed f16/f32/bf16, sharded in 3 files with model.safetensors.index.json.
  mlx_q           language_model.model.* MLX conversion: conv [C,K,1], norms already shifted,
                  switch_mlp stacks, 4-bit g64 with the config's quantization block giving an
                  8-bit router and shared_expert_gate (and one 6-bit g32 override), quantised
                  embed_tokens and lm_head, 2 shards + index.
  mlx_infer       the same layout without a quantization block: every matrix has its own
                  (bits, group), covering bits 2,3,4,5,6,8 x groups 32,64,128; bits inferred.
  tied            flat config with tie_word_embeddings and no lm_head; all layers full attention.
"""
import argparse
import json
import os
import struct

import numpy as np

# ---------------------------------------------------------------------------------------------
# safetensors writer


def bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class Tensor:
    def __init__(self, dtype, shape, raw):
        self.dtype, self.shape, self.raw = dtype, list(shape), raw


def write_safetensors(path, tensors, metadata=None):
    header = {}
    off = 0
    blobs = []
    # Larger elements first (as the reference writer does), so that every tensor stays aligned to
    # its element size once the header is padded to 8 bytes.
    size = {"F32": 4, "U32": 4, "BF16": 2, "F16": 2}
    for name, t in sorted(tensors.items(), key=lambda kv: -size[kv[1].dtype]):
        header[name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [off, off + len(t.raw)]}
        off += len(t.raw)
        blobs.append(t.raw)
    if metadata:
        header["__metadata__"] = metadata
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)  # pad so the data buffer starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def write_sharded(d, tensors, n_shards):
    names = list(tensors)
    per = (len(names) + n_shards - 1) // n_shards
    wmap = {}
    for s in range(n_shards):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, n_shards)
        part = {k: tensors[k] for k in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(d, fn), part)
        for k in part:
            wmap[k] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(t.raw) for t in tensors.values())},
                   "weight_map": wmap}, f, indent=1)


# ---------------------------------------------------------------------------------------------
# checkpoint builder


class Builder:
    def __init__(self, rng, out, name):
        self.rng = rng
        self.dir = os.path.join(out, name)
        os.makedirs(os.path.join(self.dir, "expect"), exist_ok=True)
        self.tensors = {}
        self.manifest = {"mats": [], "vecs": []}
        self.n_used = 0

    def _expect(self, kind, field, arr):
        fn = "expect/%s.f32" % field
        np.ascontiguousarray(arr, dtype=np.float32).tofile(os.path.join(self.dir, fn))
        self.manifest[kind].append({"field": field, "file": fn, "shape": list(arr.shape)})

    def dense(self, name, shape, dtype="BF16", scale=0.5, expect=None, field=None):
        x = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        if dtype == "BF16":
            bits = bf16_bits(x)
            raw, val = bits.tobytes(), bf16_value(bits)
        elif dtype == "F16":
            h = x.astype(np.float16)
            raw, val = h.tobytes(), h.astype(np.float32)
        else:
            raw, val = x.tobytes(), x
        self.tensors[name] = Tensor(dtype, shape, raw)
        self.n_used += 1
        return val

    def quant(self, module, shape, bits, group):
        """MLX affine tensors module.{weight,scales,biases}; returns the dequantised float32."""
        *lead, rows, cols = shape
        assert cols % group == 0 and cols * bits % 32 == 0
        q = self.rng.integers(0, 1 << bits, size=(*lead, rows, cols), dtype=np.int64)
        ng = cols // group
        s = bf16_bits((self.rng.standard_normal((*lead, rows, ng)) * 0.02).astype(np.float32))
        b = bf16_bits((self.rng.standard_normal((*lead, rows, ng)) * 0.1).astype(np.float32))
        # little-endian bit stream per row: bit k of code j is stream bit j*bits + k
        bitplanes = ((q[..., None] >> np.arange(bits)) & 1).astype(np.uint8)
        stream = bitplanes.reshape(*lead, rows, cols * bits)
        packed = np.packbits(stream, axis=-1, bitorder="little")
        words = packed.view("<u4")
        assert words.shape[-1] == cols * bits // 32
        self.tensors[module + ".weight"] = Tensor("U32", words.shape, words.tobytes())
        self.tensors[module + ".scales"] = Tensor("BF16", s.shape, s.tobytes())
        self.tensors[module + ".biases"] = Tensor("BF16", b.shape, b.tobytes())
        self.n_used += 3
        sf = np.repeat(bf16_value(s), group, axis=-1)
        bf = np.repeat(bf16_value(b), group, axis=-1)
        return (sf * q.astype(np.float32) + bf).astype(np.float32)

    def mat(self, field, arr):
        self._expect("mats", field, arr)

    def vec(self, field, arr):
        self._expect("vecs", field, arr.reshape(-1))

    def skip(self, name, shape):
        """A tensor the text model must ignore."""
        x = self.rng.standard_normal(shape).astype(np.float32)
        self.tensors[name] = Tensor("F32", shape, x.tobytes())

    def finish(self, config, info, shards=1, gen_config=None):
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
        if gen_config:
            with open(os.path.join(self.dir, "generation_config.json"), "w") as f:
                json.dump(gen_config, f)
        if shards == 1:
            write_safetensors(os.path.join(self.dir, "model.safetensors"), self.tensors,
                              {"format": "pt"})
        else:
            write_sharded(self.dir, self.tensors, shards)
        self.manifest.update(info)
        self.manifest["n_tensors"] = self.n_used
        with open(os.path.join(self.dir, "expect", "manifest.json"), "w") as f:
            json.dump(self.manifest, f, indent=1)


def text_keys(d):
    """The config.json keys of a text-config dict d (our own short names)."""
    c = {
        "vocab_size": d["V"], "hidden_size": d["H"], "num_hidden_layers": d["L"],
        "num_attention_heads": d["Hq"], "num_key_value_heads": d["Hkv"], "head_dim": d["D"],
        "linear_num_key_heads": d["Hk"], "linear_num_value_heads": d["Hv"],
        "linear_key_head_dim": d["Dk"], "linear_value_head_dim": d["Dv"],
        "linear_conv_kernel_dim": d["K"], "num_experts": d["E"], "num_experts_per_tok": d["topk"],
        "moe_intermediate_size": d["I"], "shared_expert_intermediate_size": d["Is"],
        "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
    }
    return c


def build_model(bd, d, pfx, head, mats, vec_dtype="BF16", conv_mlx=False, shifted_on_disk=False,
                experts="fused", alog_dtype="F32", tied=False):
    """Write every text tensor. mats(module, field, shape) writes one matrix and returns its values.
    The expected norm gains are stored+1 for raw checkpoints, stored as-is for MLX conversions."""
    H, V = d["H"], d["V"]
    C = 2 * d["Hk"] * d["Dk"] + d["Hv"] * d["Dv"]
    add = 0.0 if shifted_on_disk else 1.0
    bd.mat("embed", mats(pfx + "embed_tokens", "embed", (V, H)))
    if not tied:
        bd.mat("lm_head", mats(head, "lm_head", (V, H)))
    nv = bd.dense(pfx + "norm.weight", (H,), vec_dtype, 0.1)
    bd.vec("final_norm", nv + add)
    for i in range(d["L"]):
        P = "%slayers.%d." % (pfx, i)
        f = "layers.%d." % i
        bd.vec(f + "in_norm", bd.dense(P + "input_layernorm.weight", (H,), vec_dtype, 0.1) + add)
        bd.vec(f + "post_norm",
               bd.dense(P + "post_attention_layernorm.weight", (H,), vec_dtype, 0.1) + add)
        if not d["full"][i]:
            A = P + "linear_attn."
            bd.mat(f + "qkv", mats(A + "in_proj_qkv", f + "qkv", (C, H)))
            bd.mat(f + "z", mats(A + "in_proj_z", f + "z", (d["Hv"] * d["Dv"], H)))
            bd.mat(f + "b", mats(A + "in_proj_b", f + "b", (d["Hv"], H)))
            bd.mat(f + "a", mats(A + "in_proj_a", f + "a", (d["Hv"], H)))
            bd.mat(f + "out", mats(A + "out_proj", f + "out", (H, d["Hv"] * d["Dv"])))
            shape = (C, d["K"], 1) if conv_mlx else (C, 1, d["K"])
            cv = bd.dense(A + "conv1d.weight", shape, vec_dtype)
            bd.vec(f + "conv", cv.reshape(C, d["K"]))
            bd.vec(f + "dt_bias", bd.dense(A + "dt_bias", (d["Hv"],), vec_dtype))
            alog = bd.dense(A + "A_log", (d["Hv"],), alog_dtype)
            bd.vec(f + "A", -np.exp(alog.astype(np.float64)).astype(np.float32))
            bd.vec(f + "gnorm", bd.dense(A + "norm.weight", (d["Dv"],), vec_dtype) + 0.0)
        else:
            A = P + "self_attn."
            D = d["D"]
            bd.mat(f + "q", mats(A + "q_proj", f + "q", (d["Hq"] * 2 * D, H)))
            bd.mat(f + "k", mats(A + "k_proj", f + "k", (d["Hkv"] * D, H)))
            bd.mat(f + "v", mats(A + "v_proj", f + "v", (d["Hkv"] * D, H)))
            bd.mat(f + "o", mats(A + "o_proj", f + "o", (H, d["Hq"] * D)))
            bd.vec(f + "q_norm", bd.dense(A + "q_norm.weight", (D,), vec_dtype, 0.1) + add)
            bd.vec(f + "k_norm", bd.dense(A + "k_norm.weight", (D,), vec_dtype, 0.1) + add)
        M = P + "mlp."
        E, I = d["E"], d["I"]
        bd.mat(f + "router", mats(M + "gate", f + "router", (E, H)))
        if experts == "fused":
            gu = bd.dense(M + "experts.gate_up_proj", (E, 2 * I, H))
            dn = bd.dense(M + "experts.down_proj", (E, H, I))
            for e in range(E):
                bd.mat(f + "gate.%d" % e, gu[e, :I])
                bd.mat(f + "up.%d" % e, gu[e, I:])
                bd.mat(f + "down.%d" % e, dn[e])
        elif experts == "per_expert":
            for e in range(E):
                X = M + "experts.%d." % e
                bd.mat(f + "gate.%d" % e, mats(X + "gate_proj", f + "gate.%d" % e, (I, H)))
                bd.mat(f + "up.%d" % e, mats(X + "up_proj", f + "up.%d" % e, (I, H)))
                bd.mat(f + "down.%d" % e, mats(X + "down_proj", f + "down.%d" % e, (H, I)))
        else:  # switch_mlp stacks
            g = mats(M + "switch_mlp.gate_proj", f + "gate", (E, I, H))
            u = mats(M + "switch_mlp.up_proj", f + "up", (E, I, H))
            dn = mats(M + "switch_mlp.down_proj", f + "down", (E, H, I))
            for e in range(E):
                bd.mat(f + "gate.%d" % e, g[e])
                bd.mat(f + "up.%d" % e, u[e])
                bd.mat(f + "down.%d" % e, dn[e])
        Is = d["Is"]
        bd.mat(f + "sh_gate", mats(M + "shared_expert.gate_proj", f + "sh_gate", (Is, H)))
        bd.mat(f + "sh_up", mats(M + "shared_expert.up_proj", f + "sh_up", (Is, H)))
        bd.mat(f + "sh_down", mats(M + "shared_expert.down_proj", f + "sh_down", (H, Is)))
        bd.mat(f + "sh_score", mats(M + "shared_expert_gate", f + "sh_score", (1, H)))


def dense_mats(bd, dtype_of=lambda field: "BF16"):
    def f(module, field, shape):
        return bd.dense(module + ".weight", shape, dtype_of(field))
    return f


# Odd, small dims for the dense checkpoints.
ODD = dict(V=97, H=45, L=4, Hq=3, Hkv=1, D=10, Hk=2, Hv=4, Dk=6, Dv=5, K=3, E=5, topk=2, I=7,
           Is=9, full=[0, 1, 0, 1])
# Quantisable dims (every input width a multiple of the groups in use).
QD = dict(V=101, H=128, L=4, Hq=2, Hkv=1, D=32, Hk=2, Hv=4, Dk=16, Dv=16, K=4, E=4, topk=2, I=64,
          Is=64, full=[0, 0, 0, 1])


def make_hf_fused(out, rng):
    d = ODD
    bd = Builder(rng, out, "hf_fused")
    build_model(bd, d, "model.language_model.", "lm_head", dense_mats(bd), experts="fused")
    bd.skip("model.visual.blocks.0.attn.qkv.weight", (6, 4))
    bd.skip("mtp.fc.weight", (4, 8))
    bd.skip("mtp.layers.0.mlp.experts.0.gate_proj.weight", (3, 3))
    tc = text_keys(d)
    tc["layer_types"] = ["full_attention" if x else "linear_attention" for x in d["full"]]
    tc["rope_parameters"] = {"rope_type": "default", "rope_theta": 5000.0,
                             "partial_rotary_factor": 0.4, "mrope_section": [1, 1, 0]}
    tc["eos_token_id"] = 90
    cfg = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
           "text_config": tc, "vision_config": {"depth": 1}, "tie_word_embeddings": False}
    bd.finish(cfg, {"layout": 0, "shifted": 1, "rope_dim": 4, "rope_theta": 5000.0,
                    "eos": [90, 91, 92]}, gen_config={"eos_token_id": [91, 92, 90]})


def make_hf_text(out, rng):
    d = dict(ODD, full=[0, 0, 1, 0])
    bd = Builder(rng, out, "hf_text")
    kinds = ["BF16", "F16", "F32"]
    counter = [0]

    def dt(field):
        counter[0] += 1
        return kinds[counter[0] % 3]
    build_model(bd, d, "model.", "lm_head", dense_mats(bd, dt), vec_dtype="F16",
                experts="per_expert", alog_dtype="BF16")
    cfg = dict(text_keys(d), architectures=["Qwen3_5MoeForCausalLM"], model_type="qwen3_5_moe_text",
               full_attention_interval=3, partial_rotary_factor=0.2, rope_theta=1e4,
               eos_token_id=[3, 5])
    bd.finish(cfg, {"layout": 1, "shifted": 1, "rope_dim": 2, "rope_theta": 1e4,
                    "eos": [3, 5]}, shards=3)


def make_mlx_q(out, rng):
    d = QD
    bd = Builder(rng, out, "mlx_q")
    pfx = "language_model.model."
    qblock = {"group_size": 64, "bits": 4, "mode": "affine"}
    for i in range(d["L"]):
        qblock[pfx + "layers.%d.mlp.gate" % i] = {"group_size": 64, "bits": 8}
        qblock[pfx + "layers.%d.mlp.shared_expert_gate" % i] = {"group_size": 64, "bits": 8}
    qblock[pfx + "layers.1.mlp.shared_expert_gate"] = {"group_size": 32, "bits": 6}

    def mats(module, field, shape):
        o = qblock.get(module, qblock)
        return bd.quant(module, shape, o["bits"], o["group_size"])
    build_model(bd, d, pfx, "language_model.lm_head", mats, conv_mlx=True, shifted_on_disk=True,
                experts="switch")
    tc = text_keys(d)
    tc["layer_types"] = ["full_attention" if x else "linear_attention" for x in d["full"]]
    tc["eos_token_id"] = 100
    cfg = {"model_type": "qwen3_5_moe", "text_config": tc, "quantization": qblock,
           "quantization_config": qblock}
    bd.finish(cfg, {"layout": 2, "shifted": 0, "rope_dim": 8, "rope_theta": 1e7, "eos": [100]},
              shards=2)


def make_mlx_infer(out, rng):
    d = QD
    bd = Builder(rng, out, "mlx_infer")
    combos = [(b, g) for b in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128)]
    used = set()
    k = [0]

    def mats(module, field, shape):
        for _ in range(len(combos)):
            b, g = combos[k[0] % len(combos)]
            k[0] += 1
            if shape[-1] % g == 0:
                used.add((b, g))
                return bd.quant(module, shape, b, g)
        raise AssertionError(shape)
    build_model(bd, d, "language_model.model.", "language_model.lm_head", mats, conv_mlx=True,
                shifted_on_disk=True, experts="switch")
    assert used == set(combos), sorted(set(combos) - used)
    cfg = dict(text_keys(d), model_type="qwen3_5_moe",
               layer_types=["full_attention" if x else "linear_attention" for x in d["full"]])
    bd.finish(cfg, {"layout": 2, "shifted": 0, "rope_dim": 8, "rope_theta": 1e7, "eos": []})


def make_tied(out, rng):
    d = dict(ODD, L=2, full=[1, 1], V=33)
    bd = Builder(rng, out, "tied")
    build_model(bd, d, "model.", "lm_head", dense_mats(bd), experts="fused", tied=True)
    cfg = dict(text_keys(d), full_attention_interval=1, tie_word_embeddings=True,
               partial_rotary_factor=0.2)
    bd.finish(cfg, {"layout": 1, "shifted": 1, "rope_dim": 2, "rope_theta": 1e7, "eos": [],
                    "tied": 1})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    for fn in (make_hf_fused, make_hf_text, make_mlx_q, make_mlx_infer, make_tied):
        fn(a.out, rng)


if __name__ == "__main__":
    main()
