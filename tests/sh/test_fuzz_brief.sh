#!/usr/bin/env bash
# test_fuzz_brief.sh: the CI form of `make fuzz`. Builds every libFuzzer target of tests/fuzz/
# (clang, ASan + UBSan, tests/fuzz/Makefile.fuzz), replays each committed corpus (seeds and the
# inputs of crashes found earlier, kept as regression tests), then fuzzes each target for
# $FUZZ_BRIEF_SECONDS (default 12) from that corpus into a scratch directory. Any crash, leak,
# sanitizer report or timeout fails the test and leaves the input in $BUILD/test-logs/fuzz-crashes.
#
# Skips (exit 0, with a message) when clang or its libFuzzer runtime is missing (tools/setup.sh
# installs them), and under `make test SAN=1`: the fuzzers are sanitizer builds already, so the
# plain pass covers them.
set -u
cd "$(dirname "$0")/../.."
secs=${FUZZ_BRIEF_SECONDS:-12}
if [ "${LILY_BUILD:-build}" = build-san ]; then
    echo "skip: fuzzers run in the plain 'make test' pass (they are ASan+UBSan builds already)"
    exit 0
fi
cc=${FUZZ_CC:-clang}
probe=$(mktemp -d); trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > "$probe/p.c"
if ! command -v "$cc" >/dev/null 2>&1 ||
   ! "$cc" -fsanitize=fuzzer,address,undefined -o "$probe/p" "$probe/p.c" >/dev/null 2>&1; then
    echo "skip: no clang with libFuzzer ($cc -fsanitize=fuzzer failed); run tools/setup.sh (clang, libclang-rt-14-dev)"
    exit 0
fi

make -s -j2 -f tests/fuzz/Makefile.fuzz build-fuzzers || { echo "FAIL: fuzzer build"; exit 1; }

crashdir=${LILY_BUILD:-build}/test-logs/fuzz-crashes
mkdir -p "$crashdir"
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fail=0
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    bin=build/fuzz/$name
    corpus=tests/fuzz/corpus/$name
    [ -d "$corpus" ] || { echo "FAIL: $name has no committed corpus ($corpus)"; fail=1; continue; }
    opts=$(cat "tests/fuzz/$name.options" 2>/dev/null || true)
    # 1. Every committed input (regression inputs included) once.
    # shellcheck disable=SC2086
    if ! "$bin" -runs=0 $opts "$corpus" >"$probe/$name.replay.log" 2>&1; then
        echo "FAIL: $name: a committed input crashes"; tail -n 40 "$probe/$name.replay.log"; fail=1; continue
    fi
    # 2. A short fuzzing run; new inputs go to scratch so the committed corpus stays as it is.
    mkdir -p "$probe/$name"
    # shellcheck disable=SC2086
    if "$bin" -max_total_time="$secs" -timeout=30 -print_final_stats=1 $opts \
           -artifact_prefix="$crashdir/$name-" "$probe/$name" "$corpus" >"$probe/$name.log" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$probe/$name.log" | grep -o '[0-9]*$')
        echo "ok: $name: ${execs:-?} runs in ${secs}s, corpus $(ls "$corpus" | wc -l) files"
    else
        echo "FAIL: $name: crash (input in $crashdir)"; tail -n 40 "$probe/$name.log"; fail=1
    fi
done
exit $fail
