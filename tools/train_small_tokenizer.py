#!/usr/bin/env python3
"""train_small_tokenizer.py: train the small Qwen3.5-style tokenizer used by tiny test models.

Byte-level BPE with 4096 ids in all: the Qwen3.5 Split regex (behavior Isolated), ByteLevel without
prefix space or regex, NFC, the ByteLevel decoder, and the Qwen3.5 special/added token strings at
the end of the vocabulary. Trained with HF `tokenizers` on English text found on this machine
(compressed Debian docs and the project's spec files), read in a fixed order so runs are repeatable.

    /work/venv-ref/bin/python tools/train_small_tokenizer.py tests/fixtures/tokenizers/small

Ids are frozen once committed (tiny models and the demo model use them): do not rerun casually.
"""
import glob
import gzip
import json
import os
import sys

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 4096
# (content, special) in Qwen3.5 order; they take the last ids of the vocabulary.
ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
         ("<tool_call>", False), ("</tool_call>", False), ("<tool_response>", False),
         ("</tool_response>", False), ("<think>", False), ("</think>", False)]


def corpus(limit_bytes=6 << 20):
    files = sorted(glob.glob("/usr/share/doc/**/*.gz", recursive=True))
    files += sorted(glob.glob("/work/shared/spec/*.md"))
    total = 0
    for f in files:
        try:
            data = gzip.open(f).read() if f.endswith(".gz") else open(f, "rb").read()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError):
            continue
        total += len(data)
        yield text
        if total > limit_bytes:
            return


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenizers/small"
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)  # as Qwen's (adds no tokens)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(ADDED), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    base = tok.get_vocab_size()
    for content, special in ADDED:
        if special:
            tok.add_special_tokens([content])
        else:
            tok.add_tokens([content])
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    # Added tokens with HF's default flags for each kind, as a Qwen tokenizer_config.json lists them.
    spec = json.load(open(os.path.join(out, "tokenizer.json")))
    dec = {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                "single_word", "special")}
           for t in spec["added_tokens"]}
    cfg = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": dec,
           "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
           "model_max_length": 262144, "tokenizer_class": "Qwen2Tokenizer",
           "unk_token": None, "errors": "replace", "clean_up_tokenization_spaces": False}
    json.dump(cfg, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=2)
    print(f"{out}: {base} base tokens + {len(ADDED)} added = {VOCAB}")


if __name__ == "__main__":
    main()
