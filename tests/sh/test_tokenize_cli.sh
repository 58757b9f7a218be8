#!/usr/bin/env bash
# test_tokenize_cli.sh: the `lily tokenize` / `lily detokenize` contract: JSON array output, exact
# file bytes, added tokens matched, decoded text printed exactly, one-line errors and non-zero exit
# on bad input (never a crash). Expected ids come from the HF-made golden file of the small vocab.
set -u
LILY=${LILY_BIN:-build/lily}
M=tests/fixtures/tokenizers/small
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # name, condition result
    if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails+1)); fi
}
golden_ids() { # text -> ids as printed by tokenize, from the golden file
    python3 -c 'import json,sys
for l in open(sys.argv[1], encoding="utf-8"):
    c = json.loads(l)
    if c.get("text") == sys.argv[2]: print("[" + ", ".join(map(str, c["ids"])) + "]"); break' "$M/golden.jsonl" "$1"
}

out=$("$LILY" tokenize --model "$M" --text "Hello, world!"); check "tokenize --text" $([ "$out" = "$(golden_ids 'Hello, world!')" ]; echo $?)
t='<|im_start|>user
hi<|im_end|>
<|im_start|>assistant
'
out=$("$LILY" tokenize --model "$M" --text "$t"); check "added tokens matched" $([ "$out" = "$(golden_ids "$t")" ]; echo $?)
printf 'a\r\nb\r\n\r\n' > "$tmp/crlf.txt"
out=$("$LILY" tokenize --model "$M" --file "$tmp/crlf.txt"); check "file read as exact bytes" $([ "$out" = "$(golden_ids $'a\r\nb\r\n\r\n')" ]; echo $?)
printf '' > "$tmp/empty.txt"
out=$("$LILY" tokenize --model "$M" --file "$tmp/empty.txt"); check "empty file gives []" $([ "$out" = "[]" ]; echo $?)
# Round trip through detokenize, including the comma list as tokenize prints it.
ids=$("$LILY" tokenize --model "$M" --text "naïve café 中文 😀 <think>x</think>")
list=$(echo "$ids" | tr -d '[] ')
out=$("$LILY" detokenize --model "$M" --ids "$list"); check "detokenize round trip" $([ "$out" = "naïve café 中文 😀 <think>x</think>" ]; echo $?)
out=$("$LILY" detokenize --model "$M" --ids "$ids"); check "detokenize accepts [a, b]" $([ "$out" = "naïve café 中文 😀 <think>x</think>" ]; echo $?)
out=$("$LILY" detokenize --model "$M" --ids 4088,39,4089 --skip-special); check "detokenize --skip-special" $([ "$out" = "H" ]; echo $?)
# A directory with only tokenizer.json works (no config, no weights).
mkdir "$tmp/only"; cp "$M/tokenizer.json" "$tmp/only/"
out=$("$LILY" tokenize --model "$tmp/only" --text "Hello, world!"); check "tokenizer.json alone" $([ "$out" = "$(golden_ids 'Hello, world!')" ]; echo $?)

# Errors: one line "lily: <file>: <problem>", non-zero exit, no crash (exit code < 128).
err_case() { # name, expected substring, command...
    local name=$1 want=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    local lines=$(wc -l < "$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" = 1 ] && grep -q "^lily: .*$want" "$tmp/err"; then
        echo "ok   $name"
    else
        echo "FAIL $name (rc $rc): $(head -c 300 "$tmp/err")"; fails=$((fails+1))
    fi
}
err_case "missing model dir" "/nonexistent/tokenizer.json" "$LILY" tokenize --model /nonexistent --text hi
err_case "missing input file" "$tmp/nope.txt" "$LILY" tokenize --model "$M" --file "$tmp/nope.txt"
printf 'ab\xffcd' > "$tmp/bad.txt"
err_case "invalid UTF-8 file" "$tmp/bad.txt: invalid UTF-8 at byte 2" "$LILY" tokenize --model "$M" --file "$tmp/bad.txt"
mkdir "$tmp/trunc"; head -c 5000 "$M/tokenizer.json" > "$tmp/trunc/tokenizer.json"
err_case "truncated tokenizer.json" "$tmp/trunc/tokenizer.json" "$LILY" tokenize --model "$tmp/trunc" --text hi
mkdir "$tmp/uni"; sed 's/"type": *"BPE"/"type":"Unigram"/' "$M/tokenizer.json" > "$tmp/uni/tokenizer.json"
err_case "Unigram model" "Unigram" "$LILY" tokenize --model "$tmp/uni" --text hi
mkdir "$tmp/cfg"; cp "$M/tokenizer.json" "$tmp/cfg/"; echo '{"added_tokens_decoder": ' > "$tmp/cfg/tokenizer_config.json"
err_case "malformed tokenizer_config.json" "tokenizer_config.json" "$LILY" tokenize --model "$tmp/cfg" --text hi
err_case "id out of range" "out of range" "$LILY" detokenize --model "$M" --ids 1,99999
err_case "negative id" "out of range" "$LILY" detokenize --model "$M" --ids -5
err_case "ids not numbers" "--ids" "$LILY" detokenize --model "$M" --ids 1,x
"$LILY" tokenize --model "$M" >/dev/null 2>&1; check "tokenize without input is a usage error" $([ $? = 2 ]; echo $?)

echo "$fails failed"
[ $fails -eq 0 ]
