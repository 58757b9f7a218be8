#!/usr/bin/env bash
# test_prompt_cli.sh: `lily prompt` against the golden renderings in tests/fixtures/templates/cases
# (made by tools/render_template_ref.py with jinja2, checked against HF apply_chat_template), for
# both the Qwen3.5 and Qwen3.6 templates, from chat_template.jinja and from tokenizer_config.json;
# refused requests and foreign templates must exit non-zero with one line on stderr.
set -u
LILY=${LILY_BIN:-build/lily}
T=tests/fixtures/templates
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for v in qwen3.5 qwen3.6; do
    mkdir -p "$tmp/$v"
    cp "$T/$v.jinja" "$tmp/$v/chat_template.jinja"
done

n=0
for req in "$T"/cases/*.json; do
    name=$(basename "$req" .json)
    case "$name" in err_*) continue ;; esac
    for v in qwen3.5 qwen3.6; do
        for dir in "$tmp/$v" "$T/config-$v"; do  # config-*: the template in tokenizer_config.json
            "$LILY" prompt --model "$dir" --request "$req" > "$tmp/out" 2> "$tmp/err" || { bad "$name ($v): exit $? $(cat "$tmp/err")"; continue; }
            cmp -s "$tmp/out" "$T/cases/$name.$v.txt" || { bad "$name ($v, $dir): output differs"; diff <(cat -A "$T/cases/$name.$v.txt") <(cat -A "$tmp/out") | head -10; }
            n=$((n+1))
        done
    done
done
echo "$n renderings compared"

for req in "$T"/cases/err_*.json; do
    name=$(basename "$req" .json)
    "$LILY" prompt --model "$tmp/qwen3.5" --request "$req" > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ $rc -eq 1 ] || bad "$name: exit $rc, expected 1"
    [ "$(wc -l < "$tmp/err")" -eq 1 ] || bad "$name: stderr is not one line: $(cat "$tmp/err")"
    [ -s "$tmp/out" ] && bad "$name: wrote to stdout"
done

# Malformed JSON, a missing file, a foreign template, a modified Qwen template, no template at all.
printf '{"messages": [' > "$tmp/trunc.json"
printf '\xff\xfe' > "$tmp/binary.json"
for req in "$tmp/trunc.json" "$tmp/binary.json" "$tmp/does-not-exist.json"; do
    "$LILY" prompt --model "$tmp/qwen3.5" --request "$req" > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] || bad "$req: exit $rc, stderr: $(cat "$tmp/err")"
done
mkdir -p "$tmp/foreign" "$tmp/modified" "$tmp/none"
echo '{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}' > "$tmp/foreign/chat_template.jinja"
sed 's/Reminder:/Reminder (edited):/' "$T/qwen3.5.jinja" > "$tmp/modified/chat_template.jinja"
for d in foreign modified none; do
    "$LILY" prompt --model "$tmp/$d" --request "$T/cases/single_user.json" > /dev/null 2> "$tmp/err"; rc=$?
    [ $rc -eq 1 ] || bad "template $d: exit $rc"
    [ "$(wc -l < "$tmp/err")" -eq 1 ] || bad "template $d: stderr not one line"
    [ "$d" = none ] || grep -q "chat_template.jinja: not a chat template Lily renders" "$tmp/err" || bad "template $d: message: $(cat "$tmp/err")"
done
# A template saved with CRLF line ends and a trailing newline is still recognised.
mkdir -p "$tmp/crlf"; sed 's/$/\r/' "$T/qwen3.5.jinja" > "$tmp/crlf/chat_template.jinja"
"$LILY" prompt --model "$tmp/crlf" --request "$T/cases/single_user.json" | cmp -s - "$T/cases/single_user.qwen3.5.txt" || bad "CRLF template"

[ $fail -eq 0 ] && echo "test_prompt_cli: ok"
exit $fail
