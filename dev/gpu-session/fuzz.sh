#!/usr/bin/env bash
# fuzz.sh SECONDS (device, from the repository root): every libFuzzer target of .carry/fuzz.tar.xz on
# the spare cores (nice 10) for SECONDS, from the committed corpus; logs with CPU time in /tmp/logs,
# grown corpora in /tmp/corp (the caller tars both).
C=$(pwd)/.carry; L=/tmp/logs; export LD_LIBRARY_PATH=$C/lib; mkdir -p /tmp/fz $L && tar xJf $C/fuzz.tar.xz -C /tmp/fz
for t in $(ls /tmp/fz); do
    mkdir -p /tmp/corp/$t && cp -r tests/fuzz/corpus/$t/. /tmp/corp/$t/
    ( TIMEFORMAT="$t cpu_user=%U cpu_sys=%S wall=%R"
      { time nice -n 10 /tmp/fz/$t -max_total_time=$1 -print_final_stats=1 -artifact_prefix=$L/$t- \
            $(cat tests/fuzz/$t.options 2>/dev/null) /tmp/corp/$t > $L/$t.log 2>&1; } 2>> $L/$t.log ) &
done
wait
for f in $L/fuzz_*.log; do grep -E "cpu_user|stat::number_of_executed_units" "$f" | tr '\n' ' '; echo; done > $L/fuzz_summary.txt
