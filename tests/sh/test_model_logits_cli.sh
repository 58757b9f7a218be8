#!/usr/bin/env bash
# test_model_logits_cli.sh: `lily logits` and `lily generate` reject bad arguments cleanly (exit 2
# for bad usage, 1 for a model or file that cannot be used, one "lily..." line on stderr, no crash),
# and the step size does not change the logits file by a single bit on the CPU backend.
# Run from the repository root with LILY_BIN set (tests/run_all.sh does both).
set -u
LILY=${LILY_BIN:-build/lily}
M=tests/fixtures/models/hf-gqa
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LILY_LOG=0
fail=0

# expect CODE DESCRIPTION -- command...: the exit status is CODE and stderr is one "lily" line.
expect() {
    local want=$1 what=$2
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, expected $want"; cat "$tmp/err"; fail=1; return
    fi
    if [ "$want" -ne 0 ] && ! grep -q '^lily' "$tmp/err"; then
        echo "FAIL: $what: no 'lily...' error line"; cat "$tmp/err"; fail=1; return
    fi
    echo "ok: $what"
}

expect 0 "valid run" -- "$LILY" logits --model $M --ids 1,2,3 --out "$tmp/a.f32"
[ "$(stat -c %s "$tmp/a.f32")" -eq $((3 * 300 * 4)) ] || { echo "FAIL: logits file size"; fail=1; }

expect 2 "missing --ids" -- "$LILY" logits --model $M --out "$tmp/x"
expect 2 "missing --out" -- "$LILY" logits --model $M --ids 1
expect 2 "empty ids" -- "$LILY" logits --model $M --ids "" --out "$tmp/x"
expect 2 "letters in ids" -- "$LILY" logits --model $M --ids 1,a,3 --out "$tmp/x"
expect 2 "negative id" -- "$LILY" logits --model $M --ids 1,-2 --out "$tmp/x"
expect 2 "empty field" -- "$LILY" logits --model $M --ids 1,,2 --out "$tmp/x"
expect 2 "trailing comma" -- "$LILY" logits --model $M --ids 1,2, --out "$tmp/x"
expect 2 "spaces" -- "$LILY" logits --model $M --ids "1, 2" --out "$tmp/x"
expect 2 "id overflow" -- "$LILY" logits --model $M --ids 99999999999999999999 --out "$tmp/x"
expect 2 "id >= vocab" -- "$LILY" logits --model $M --ids 1,300 --out "$tmp/x"
expect 2 "step 0" -- "$LILY" logits --model $M --ids 1,2 --step 0 --out "$tmp/x"
expect 2 "step not a number" -- "$LILY" logits --model $M --ids 1,2 --step x --out "$tmp/x"
expect 2 "unknown backend" -- "$LILY" logits --model $M --ids 1 --backend tpu --out "$tmp/x"
expect 2 "unknown option" -- "$LILY" logits --model $M --ids 1 --out "$tmp/x" --bogus
expect 1 "missing model" -- "$LILY" logits --model "$tmp/nope" --ids 1 --out "$tmp/x"
expect 1 "unwritable output" -- "$LILY" logits --model $M --ids 1 --out "$tmp/no/such/dir/x"
[ ! -e "$tmp/x" ] || { echo "FAIL: a failed run left an output file"; fail=1; }

expect 0 "generate" -- "$LILY" generate --model $M --ids 5,6,7 -n 4
grep -Eq '^[0-9]+(,[0-9]+){0,3}$' "$tmp/out" || { echo "FAIL: generate output '$(cat "$tmp/out")'"; fail=1; }
expect 2 "generate id >= vocab" -- "$LILY" generate --model $M --ids 300 -n 2
expect 2 "generate bad -n" -- "$LILY" generate --model $M --ids 1 -n -1
expect 1 "generate missing model" -- "$LILY" generate --model "$tmp/nope" --ids 1

# Step sizes: identical bits (each token's result is computed the same way in any chunking).
ids=$(cat $M/ids.txt)
"$LILY" logits --model $M --ids "$ids" --out "$tmp/all.f32" || fail=1
for s in 1 5 13; do
    "$LILY" logits --model $M --ids "$ids" --step $s --out "$tmp/s.f32" || fail=1
    cmp -s "$tmp/all.f32" "$tmp/s.f32" || { echo "FAIL: --step $s changes the logits"; fail=1; }
done
LILY_CPU_CHUNK=4 "$LILY" logits --model $M --ids "$ids" --out "$tmp/c.f32" || fail=1
cmp -s "$tmp/all.f32" "$tmp/c.f32" || { echo "FAIL: internal chunk 4 changes the logits"; fail=1; }
LILY_THREADS=1 "$LILY" logits --model $M --ids "$ids" --out "$tmp/t.f32" || fail=1
cmp -s "$tmp/all.f32" "$tmp/t.f32" || { echo "FAIL: one thread changes the logits"; fail=1; }

exit $fail
