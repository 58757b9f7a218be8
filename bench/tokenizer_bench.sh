#!/usr/bin/env bash
# tokenizer_bench.sh: tokenizer speed, Lily vs HF tokenizers (single-threaded: one encode() of one
# string, TOKENIZERS_PARALLELISM=false), on the same several-MB text, for one tokenizer directory.
#   bench/tokenizer_bench.sh [DIR]        (default build/tokenizers/qwen3.5; make first)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/tokenizers/qwen3.5}
PY=${LILY_PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
cc -O2 -std=c11 -D_GNU_SOURCE -Isrc bench/tokenizer_bench.c build/liblily.a \
   $(pkg-config --libs jansson libmicrohttpd oniguruma libutf8proc) -lm -pthread -o build/tokenizer_bench
# The text: English docs and specs, code, and some CJK / accented prose, about 8 MB.
txt=build/bench_text.txt
if [ ! -s $txt ]; then
    "$PY" - "$txt" <<'PY'
import glob, gzip, sys
parts = []
for f in sorted(glob.glob("/usr/share/doc/**/*.gz", recursive=True))[:400]:
    try: parts.append(gzip.open(f).read().decode("utf-8"))
    except Exception: pass
for f in sorted(glob.glob("src/*.[ch]")) + sorted(glob.glob("/work/shared/spec/*.md")):
    parts.append(open(f, encoding="utf-8").read())
parts.append("中文的文本，包括标点符号。日本語のテキスト。 Ça été très déjà vu, naïve café. " * 2000)
text = "\n".join(parts)
while len(text.encode()) < 8 << 20: text += text
open(sys.argv[1], "w", encoding="utf-8").write(text[: 8 << 20])
PY
fi
echo "tokenizer: $dir   text: $(wc -c < $txt) bytes   $(date -u +%Y-%m-%d)   $(nproc) cores"
build/tokenizer_bench "$dir" "$txt" 3
TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 "$PY" - "$dir" "$txt" <<'PY'
import sys, time
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
text = open(sys.argv[2], encoding="utf-8").read()
n = len(text.encode())
best = 1e30
for _ in range(3):
    t = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")  # fresh cache, as for Lily
    t0 = time.perf_counter(); ids = t.encode(text).ids; best = min(best, time.perf_counter() - t0)
print(f"hf    {n / best / 1e6:8.2f} MB/s  ({n} bytes -> {len(ids)} tokens in {best:.3f} s)")
PY
