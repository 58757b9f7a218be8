#!/usr/bin/env python3
"""tokenizer_golden.py: the hard-string corpus for the tokenizer, and golden files made from it
with HF `tokenizers` (the reference). tests/test_tokenizer.c reads the golden files without Python;
tests/py/test_tokenizer_hf.py imports corpus() and compares against HF live.

    .venv/bin/python tools/tokenizer_golden.py DIR OUT.jsonl      (DIR holds tokenizer.json)
    # the committed ones:
    tools/tokenizer_golden.py tests/fixtures/tokenizers/small tests/fixtures/tokenizers/small/golden.jsonl
    tools/tokenizer_golden.py build/tokenizers/qwen3 tests/fixtures/tokenizers/qwen3/golden.jsonl
    tools/tokenizer_golden.py build/tokenizers/qwen3.5 tests/fixtures/tokenizers/qwen3.5/golden.jsonl

Each line is one case:
  {"text": T, "ids": [...], "plain": [...]?, "decoded": D?}
      ids    = HF encode(T) (added tokens matched, HF's default)
      plain  = HF encode(T) with no added tokens at all (tok_encode with special = 0); only when
               it differs from ids
      decoded = HF decode(ids) when it is not T itself (NFC changed the text)
  {"repeat": U, "count": N, "n_ids": K, "ids_fnv": H, "head": [...]}
      T = U repeated N times (the 1 MiB cases); H = FNV-1a 64 of the ids as little-endian int32
"""
import json
import random
import struct
import sys

HARD = [
    "", " ", "a", "Hello, world!", "Hello world", " Hello", "  Hello  ", "hello\n\nworld\n",
    # contractions in every case
    "I'm you're he's we'll they'd I've isn't", "I'M YOU'RE HE'S WE'LL THEY'D I'VE ISN'T",
    "'S 'LL 'Re 'rE 'D 'VE 'm", "don't DON'T Don'T", "'s's's", "''s", "x's", "‘s curly",
    # digits
    "1", "12", "123", "1234567890", "3.14159", "1,000,000", "v1.2.3-rc4", "٣٤٥ ١٢ ۱۲۳", "१२३ ๑๒๓",
    "Ⅻ ½ ² ⁴ ①②③", "0x1F 0b1010 1e-9",
    # whitespace of every kind
    "\t", "\t\t x", "a\tb", "\r\n", "a\r\nb\r\n\r\n", "\n", "\n\n\n", "a \n b", "   \n   ",
    "x\u0085y", "x\u2028y\u2029z", "x\u3000y\u3000\u3000", "x\u180ey", "x\u00a0y", "x\u200bz",
    "x\u2009y\u202fz", "\x0b\x0c", " \t\r\n\u0085\u2028\u3000", "end   ", "   ", "a  b   c    d",
    # scripts
    "Привет, как дела?", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया",
    "สวัสดีชาวโลก", "你好，世界！", "日本語のテキスト、カタカナ", "안녕하세요 세계", "ሰላም ዓለም",
    "Ողջույն", "გამარჯობა", "வணக்கம்", "ಕನ್ನಡ", "ລາວ", "བོད་ཡིག", "ᠮᠣᠩᠭᠣᠯ", "ꦗꦮ", "𐌰𐌱𐌲",
    "Tiếng Việt có dấu", "Ærøskøbing Straße œuvre", "İstanbul ıi", "ǅungla ǈ",
    # combining marks, decomposed and compatibility characters (NFC)
    "e\u0301", "cafe\u0301", "Cafe\u0301 A\u030a", "\u0301start", "a\u0301\u0302\u0303\u0304",
    "o\u0308\u0304", "q\u0307\u0323", "\u1100\u1161\u11a8", "\u1100\u1161 \u1112\u1161\u11ab",
    "\u212b \u2126 \u212a", "ﬁ ﬂ ﬀ", "Ｆｕｌｌｗｉｄｔｈ", "ｶﾀｶﾅ", "\u0958\u0959", "\u2000\u2001",
    "\u0344\u0340", "\u00c5\u0041\u030a", "ṩ s\u0323\u0307 s\u0307\u0323", "\u0e33 \u0eb3",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f",
    # emoji
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "❤️", "1️⃣", "🧑🏿‍🚀 astronaut", "a😀b",
    "😀😀😀😀", "🫠🪿", "☺︎☺️",
    # code
    "def f(x):\n    return x ** 2  # square\n", "int main(void) { return 0; }\n",
    "if (a && b || !c) { x += 1; }", "    indented\n\tTabbed\n", "<div class=\"a\">x</div>",
    "SELECT * FROM t WHERE id=1;", "https://example.com/a?b=c&d=e#f", "a_b_c snake_case CamelCase",
    "{\"key\": [1, 2, 3]}", "$$x^2$$", "~!@#$%^&*()_+`-=[]\\{}|;':\",./<>?", "---\n***\n",
    "foo\n\n\n\nbar", "x = '''\ndoc\n'''",
    # added tokens inside text
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>", "a<|endoftext|>b", "<|im_end|><|im_end|>", "<|im_end", "<|im_end|",
    "<<|im_end|>>", "|<|im_start|>|", "<think>\nreason\n</think>\n\nanswer", "<think></think>",
    "<tool_call>\n<function=f>\n</function>\n</tool_call>", "< think>", "<THINK>",
    "<tool_response>x</tool_response>", "text<|endoftext|>\u0301", "e<|endoftext|>\u0301",
    " <|im_start|> ", "<|im_start|><|im_end|>", "x\x00y", "\x00",
    "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", "<|vision_start|><|image_pad|><|vision_end|>",
]

# (unit, count) for the very long inputs.
LONG = [("a", 1 << 20), ("1", 1 << 20), (" ", 1 << 20), ("\n", 1 << 18), ("中", 1 << 17),
        ("ab ", 1 << 18), ("e\u0301", 1 << 17), ("<|im_end|>", 1 << 14), ("\u3000", 1 << 17),
        ("😀", 1 << 16), ("a1 ", 1 << 17), (". ", 1 << 18)]

# Code point ranges for random strings, weighted towards what tokenizers find hard.
RANGES = [((0x20, 0x7e), 30), ((0x09, 0x0d), 4), ((0xa0, 0x2ff), 8), ((0x300, 0x36f), 6),
          ((0x370, 0x52f), 4), ((0x590, 0x6ff), 3), ((0x900, 0xdff), 4), ((0xe00, 0xeff), 3),
          ((0x1100, 0x11ff), 2), ((0x2000, 0x206f), 4), ((0x3000, 0x30ff), 4), ((0x4e00, 0x9fff), 6),
          ((0xac00, 0xd7a3), 3), ((0xfe00, 0xfe0f), 2), ((0xff00, 0xffef), 2), ((0x1f300, 0x1faff), 5),
          ((0x1f1e6, 0x1f1ff), 1), ((0x0, 0xd7ff), 3), ((0xe000, 0xfffd), 1), ((0x10000, 0x10ffff), 2)]


def random_strings(seed=1234, n=300):
    rng = random.Random(seed)
    weights = [w for _, w in RANGES]
    out = []
    for _ in range(n):
        k = rng.choice([1, 2, 3, 5, 8, 13, 30, 80])
        s = []
        for _ in range(k):
            lo, hi = rng.choices([r for r, _ in RANGES], weights)[0]
            c = rng.randint(lo, hi)
            s.append(chr(c))
            if rng.random() < 0.1:
                s.append(rng.choice([" ", "  ", "\n", "'s", "'LL", "123", "\u200d", "<|im_end|>"]))
        out.append("".join(s))
    return out


def corpus():
    return HARD + random_strings()


def fnv(ids):
    h = 0xcbf29ce484222325
    for b in b"".join(struct.pack("<i", i) for i in ids):
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h


def load(d):
    from tokenizers import Tokenizer
    with open(f"{d}/tokenizer.json", encoding="utf-8") as f:
        spec = json.load(f)
    tok = Tokenizer.from_str(json.dumps(spec))
    spec["added_tokens"] = []
    plain = Tokenizer.from_str(json.dumps(spec))
    return tok, plain


def main():
    d, out = sys.argv[1], sys.argv[2]
    tok, plain = load(d)
    with open(out, "w", encoding="utf-8") as f:
        for text in corpus():
            ids = tok.encode(text).ids
            case = {"text": text, "ids": ids}
            p = plain.encode(text).ids
            if p != ids:
                case["plain"] = p
            dec = tok.decode(ids, skip_special_tokens=False)
            if dec != text:
                case["decoded"] = dec
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
        for unit, count in LONG:
            ids = tok.encode(unit * count).ids
            f.write(json.dumps({"repeat": unit, "count": count, "n_ids": len(ids), "ids_fnv": fnv(ids),
                                "head": ids[:32]}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
