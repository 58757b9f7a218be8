#!/usr/bin/env bash
# test_loader_cli.sh: `lily synth`, `lily info` and `lily quantize` from the command line, and the
# one-line errors of `lily info` on bad model directories.
set -eu
: "${LILY_BIN:=build/lily}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$LILY_BIN" synth --preset tiny --out "$tmp/tiny" --seed 3 --vocab 512 2>/dev/null
out=$("$LILY_BIN" info --model "$tmp/tiny")
echo "$out" | grep -q 'MLX (language_model.model.\*)'
echo "$out" | grep -q '^vocab  *512$'
echo "$out" | grep -q 'router .* q8 g64'
echo "$out" | grep -q 'experts .* q4 g64'
# Same seed, same bytes (independent of thread count).
"$LILY_BIN" synth --preset tiny --out "$tmp/tiny2" --seed 3 --vocab 512 --threads 1 2>/dev/null
cmp "$tmp/tiny/model.safetensors" "$tmp/tiny2/model.safetensors"
# Re-quantising at another width gives a loadable checkpoint.
"$LILY_BIN" quantize --in "$tmp/tiny" --out "$tmp/q3" --bits 3 --group-size 32 2>/dev/null
"$LILY_BIN" info --model "$tmp/q3" | grep -q 'experts .* q3 g32'
# Bad input: one line on stderr naming the path, exit 1, no crash.
for d in "$tmp/none" "$tmp"; do
    set +e; err=$("$LILY_BIN" info --model "$d" 2>&1 >/dev/null); rc=$?; set -e
    [ $rc -eq 1 ] && [ "$(echo "$err" | wc -l)" -eq 1 ] && [[ "$err" == *"$d"* ]] || { echo "bad: $d: $rc $err"; exit 1; }
done
head -c 100 "$tmp/tiny/model.safetensors" > "$tmp/tiny/x" && mv "$tmp/tiny/x" "$tmp/tiny/model.safetensors"
set +e; err=$("$LILY_BIN" info --model "$tmp/tiny" 2>&1 >/dev/null); rc=$?; set -e
[ $rc -eq 1 ] && [[ "$err" == *model.safetensors* ]] || { echo "truncated: $rc $err"; exit 1; }
echo ok
