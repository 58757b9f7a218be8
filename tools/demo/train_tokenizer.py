#!/usr/bin/env python3
"""train_tokenizer.py: train the demo model's byte-level BPE (8192 ids) and encode the corpus.

The tokenizer has the Qwen3.5 shape (spec §5.1-5.2): NFC normalizer; pre-tokenizer Sequence of
Split(the Qwen3.5 regex, Isolated) and ByteLevel(add_prefix_space false, use_regex false); BPE with
no byte fallback; ByteLevel decoder. The added tokens sit at the end of the vocabulary:
<|endoftext|>, <|im_start|>, <|im_end|> (special) and <think>, </think>, <tool_call>, </tool_call>,
<tool_response>, </tool_response> (not special). tokenizer_config.json names <|im_end|> as eos and
chat_template.jinja is the official Qwen3.5 template.

Steps (all by default, deterministic for a given corpus):
  train   learn the BPE from data/train.jsonl, write tokenizer.json, tokenizer_config.json and
          chat_template.jinja into --model-dir (models/demo), and check round trips;
  encode  tokenize train.jsonl / valid.jsonl into data/train.bin / valid.bin: little-endian uint16
          ids, every document followed by <|endoftext|>; data/meta.json records the counts.

    /work/venv-ref/bin/python tools/demo/train_tokenizer.py [--data tools/demo/data]
        [--model-dir models/demo] [--steps train,encode] [--max-train-bytes N]
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# The Qwen3.5 split pattern exactly as it appears in the official tokenizer.json (spec §5.1).
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 8192
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
NOT_SPECIAL = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TEMPLATE_SRC = [os.path.join(ROOT, "..", "shared", "data", "qwen3.5-chat_template.jinja"),
                "/work/shared/data/qwen3.5-chat_template.jinja"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def read_texts(path, max_bytes=0):
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)["text"]
            n += len(t)
            yield t
            if max_bytes and n >= max_bytes:
                return


def build_empty():
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def split_chat_markers(texts):
    # Chat exchanges contain the added tokens as text; BPE must not learn merges across them, so
    # train on the pieces between markers.
    import re
    pat = re.compile("|".join(re.escape(t) for t in SPECIAL + NOT_SPECIAL))
    for t in texts:
        for piece in pat.split(t):
            if piece:
                yield piece


def train(args):
    tok = build_empty()
    n_added = len(SPECIAL) + len(NOT_SPECIAL)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - n_added, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    texts = split_chat_markers(read_texts(os.path.join(args.data, "train.jsonl"), args.max_train_bytes))
    tok.train_from_iterator(texts, trainer)
    base = tok.get_vocab_size()
    if base != VOCAB - n_added:
        log(f"warning: BPE learnt {base} tokens, not {VOCAB - n_added} (corpus too small?)")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in NOT_SPECIAL])

    # Write, then rewrite the JSON so its fixed fields read as in Qwen's file (post_processor
    # ByteLevel, explicit BPE options).
    os.makedirs(args.model_dir, exist_ok=True)
    out = os.path.join(args.model_dir, "tokenizer.json")
    tok.save(out)
    j = json.load(open(out, encoding="utf-8"))
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False}
    m = j["model"]
    m.update({"dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
              "fuse_unk": False, "byte_fallback": False, "ignore_merges": False})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)
        f.write("\n")

    added = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
             for a in j["added_tokens"]}
    cfg = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 4096, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    with open(os.path.join(args.model_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    src = next(p for p in TEMPLATE_SRC if os.path.exists(p))
    shutil.copyfile(src, os.path.join(args.model_dir, "chat_template.jinja"))
    log(f"wrote {args.model_dir}: {Tokenizer.from_file(out).get_vocab_size()} ids")
    check(args)


def check(args):
    tok = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    nv = tok.get_vocab_size()
    assert nv == VOCAB or args.allow_small, nv
    for i, t in enumerate(SPECIAL + NOT_SPECIAL):
        assert tok.token_to_id(t) == nv - len(SPECIAL) - len(NOT_SPECIAL) + i, t
    cases = ["Hello, world! What is a hash table?", "  leading spaces\n\ttabs\r\nand CRLF\n\n\n",
             "digits 1234567 and 3.14159", "Unicode: café naïve Ångström e\u0301 日本語 😀",
             "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello.<|im_end|>\n",
             "don't WE'LL they'Re", "x" * 300]
    n = 0
    for t in cases + list(read_texts(os.path.join(args.data, "valid.jsonl"), 2_000_000)):
        ids = tok.encode(t).ids
        back = tok.decode(ids, skip_special_tokens=False)
        import unicodedata
        assert back == unicodedata.normalize("NFC", t) or back == t, (t[:80], back[:80])
        n += 1
    enc = tok.encode(cases[4])
    assert enc.ids[0] == tok.token_to_id("<|im_start|>") and tok.token_to_id("<think>") in enc.ids
    # Digits one per token, as the Qwen3.5 regex splits them.
    assert all(len(tok.decode([i])) == 1 for i in tok.encode("9876543210").ids)
    log(f"round trips ok on {n} texts")


# The official template's generation prompt with thinking on ends "<think>\n"; the answer then
# starts "\n</think>\n\n". Encoded as one text, "<think>\n\n</think>\n\n" makes "\n\n" one token,
# so a model trained only on whole texts has never seen <think> followed by a lone "\n" and does
# not know how to go on from the thinking-mode prompt. Every second chat exchange of the training
# split is therefore encoded as prompt and answer separately (the ids a server sees: the prompt it
# renders, then what the model generates); the others stay whole, which is the thinking-off prompt.
GEN_PROMPT = "<|im_start|>assistant\n<think>\n"


def split_chat_ids(tok, text, k):
    """Ids of `text` encoded as prompt + answer at its last generation prompt, for every second
    chat exchange (k counts the chat exchanges seen so far); None to keep the whole-text ids."""
    at = text.rfind(GEN_PROMPT)
    if at < 0 or not text.startswith("\n</think>\n\n", at + len(GEN_PROMPT)):
        return None
    if k % 2 == 1:
        return tok.encode(text).ids  # counted, kept whole
    cut = at + len(GEN_PROMPT)
    return tok.encode(text[:cut]).ids + tok.encode(text[cut:]).ids


def encode(args):
    tok = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    meta = {"vocab_size": tok.get_vocab_size(), "eot_id": eot, "dtype": "uint16"}
    for name in ("train", "valid"):
        texts = list(read_texts(os.path.join(args.data, name + ".jsonl")))
        chunks, n_bytes = [], 0
        n_chat = 0
        for i in range(0, len(texts), 512):
            for j, e in enumerate(tok.encode_batch(texts[i:i + 512])):
                ids = e.ids
                if name == "train":
                    alt = split_chat_ids(tok, texts[i + j], n_chat)
                    if alt is not None:
                        ids, n_chat = alt, n_chat + 1
                chunks.append(np.asarray(ids + [eot], dtype=np.uint16))
        for t in texts:
            n_bytes += len(t.encode("utf-8"))
        arr = np.concatenate(chunks) if chunks else np.zeros(0, np.uint16)
        arr.tofile(os.path.join(args.data, name + ".bin"))
        meta[name] = {"docs": len(texts), "tokens": int(arr.size), "text_bytes": n_bytes,
                      "bytes_per_token": round(n_bytes / max(1, arr.size), 3)}
        if name == "train":
            meta[name]["chat_split_at_generation_prompt"] = (n_chat + 1) // 2
        log(name, meta[name])
    with open(os.path.join(args.data, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--steps", default="train,encode")
    ap.add_argument("--max-train-bytes", type=int, default=0, help="BPE on the first N chars only")
    ap.add_argument("--allow-small", action="store_true", help="accept < 8192 ids (tiny test corpus)")
    args = ap.parse_args()
    steps = args.steps.split(",")
    if "train" in steps:
        train(args)
    if "check" in steps:
        check(args)
    if "encode" in steps:
        encode(args)


if __name__ == "__main__":
    main()
