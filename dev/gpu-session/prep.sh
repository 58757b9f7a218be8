#!/usr/bin/env bash
# prep.sh: fill .carry/ (git-ignored) with what a device run needs from this machine: the CUDA build
# (build/lily, build/lily-gpu-test, xz-compressed), the shared libraries the GPU machine lacks, the
# libFuzzer binaries (stripped, compressed) and the run scripts of this folder. Then call the device
# tool with carry [".carry"] (plus the demo data files for a training run) and `bash .carry/NAME.sh`.
# Run from the repository root after `make -j2` and `make -f tests/fuzz/Makefile.fuzz build-fuzzers`.
set -euo pipefail
mkdir -p .carry/lib
tar cJf .carry/bin.tar.xz -C build lily lily-gpu-test
# A `make TRACE=1` build (decode kernels stamp their phases for `lily-gpu-test chain`), when there is one.
if [ -x build-trace/lily-gpu-test ]; then tar cJf .carry/bin-trace.tar.xz -C build-trace lily-gpu-test; fi
# The dev/persist prototypes (built by make when nvcc is present).
[ -x build/dev/persist ] && cp build/dev/persist .carry/persist
if [ -x build/dev/persist_gv2 ]; then strip -o .carry/persist_gv2 build/dev/persist_gv2 && xz -f .carry/persist_gv2; fi
# The cluster / barrier / launch-floor probe (dev/cluster/probe.cu).
[ -x build/dev/cluster_probe ] && cp build/dev/cluster_probe .carry/cluster_probe
# The short prompts' grouped GEMM prototype (dev/qgemm_sm).
if [ -x build/dev/qgemm_sm ]; then strip -o .carry/qgemm_sm build/dev/qgemm_sm && xz -f .carry/qgemm_sm; fi
# Non-glibc libraries of the binary (the GPU machine has glibc, CUDA and the driver).
ldd build/lily | awk '/=> \//{print $3}' | grep -vE 'libc\.so|libm\.so|libpthread|libdl|librt|ld-linux|libgcc_s|libstdc' |
    while read -r l; do cp -L "$l" .carry/lib/; done
if ls build/fuzz/fuzz_* >/dev/null 2>&1; then
    d=$(mktemp -d); for f in build/fuzz/fuzz_*; do [ -x "$f" ] && strip -o "$d/$(basename "$f")" "$f"; done
    tar cJf .carry/fuzz.tar.xz -C "$d" . && rm -rf "$d"
fi
cp dev/gpu-session/*.sh dev/gpu-session/*.py .carry/
# The Qwen3.5 tokenizer files (built by make from the shared data), for runs that serve the synthetic checkpoint.
if [ -f build/tokenizers/qwen3.5/tokenizer.json ]; then
    mkdir -p .carry/tok && xz -c build/tokenizers/qwen3.5/tokenizer.json > .carry/tok/tokenizer.json.xz
    cp build/tokenizers/qwen3.5/tokenizer_config.json .carry/tok/
fi
du -sh .carry
