#!/usr/bin/env bash
# run_all.sh: run every test of the CPU suite; prints one line per test and a closing
# "N passed, N failed" line; exits non-zero if any failed.
#   BUILD=build ./tests/run_all.sh          (make test sets BUILD)
#   LILY_TEST_FILTER=tokenizer ./tests/run_all.sh   run only tests whose name contains the word
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export LILY_BIN="$PWD/$BUILD/lily"
export LILY_BUILD="$BUILD"
PY=${LILY_PY:-python3}
# Sanitizer builds (make test SAN=1): stop at the first report and check for leaks, in the test
# binaries and in every lily process a test starts (the server included: it must free everything
# on SIGTERM). A report makes the process exit non-zero, which the tests check.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=23:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
pass=0; fail=0; failed=()
logdir="$BUILD/test-logs"; mkdir -p "$logdir"

run() { # name, command...
    local name=$1; shift
    if [ -n "${LILY_TEST_FILTER:-}" ] && [[ "$name" != *"$LILY_TEST_FILTER"* ]]; then return; fi
    local t0=$(date +%s.%N)
    if "$@" >"$logdir/$name.log" 2>&1; then
        pass=$((pass+1)); printf 'PASS %-40s %6.1fs\n' "$name" "$(echo "$(date +%s.%N) - $t0" | bc)"
    else
        fail=$((fail+1)); failed+=("$name"); printf 'FAIL %-40s (log: %s)\n' "$name" "$logdir/$name.log"
        tail -n 30 "$logdir/$name.log" | sed 's/^/    /'
    fi
}

# 1. C unit tests (cmocka), one binary per module.
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run "$(basename "$t")" "$t"
done
# 2. Shell tests: CLI contract, model fixtures, bad input.
for t in tests/sh/test_*.sh; do
    [ -f "$t" ] || continue
    run "$(basename "$t" .sh)" bash "$t"
done
# 3. Python tests (reference comparisons, server with the official client), if the venv exists.
if "$PY" -c 'import pytest' >/dev/null 2>&1; then
    for t in tests/py/test_*.py; do
        [ -f "$t" ] || continue
        run "$(basename "$t" .py)" "$PY" -m pytest -q -x "$t"
    done
else
    echo "note: no pytest for $PY; Python tests skipped (set LILY_PY to a venv's python)"
fi

echo
[ $fail -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
