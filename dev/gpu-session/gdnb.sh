#!/usr/bin/env bash
# gdnb.sh (device, ~3 min): phase B of the chunked GDN with wider warp tiles (gc_tiles: 2 x 2 tiles
# in steps 1 and 2, 1 x 4 in the state update): prefill tests, e2e, memcheck, pfprof 4K, lily bench
# prefill; then Nsight Compute source-level counters (CSV under $OUT) of the chunked-GDN kernels
# and of the bf16-weight wgmma GEMM (qgone 4096 x 8192 x 2048, tile 128).
. .carry/common.sh; synth_bg; safe_start 500
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head -20; grep -iE "chunked.*T=(2048|1000|65)" $L/prefill.txt | cut -c1-200
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -30
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench 2>&1 | grep -E "^prefill "; el bench
prof() { # name, kernel regex, command...
  local n=$1 k=$2; shift 2
  timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:$k --launch-count 1 --import-source yes -o /tmp/ncu_$n "$@" > $L/ncu_$n.log 2>&1; el "ncu $n rc=$?"
  timeout 60 ncu -i /tmp/ncu_$n.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_$n.csv 2> $L/src_$n.err; xz -9 $OUT/src_$n.csv
}
prof prep gdn_chunk_prep $B/lily-gpu-test pfprof /tmp/big 4K
prof scan gdn_chunk_scan $B/lily-gpu-test pfprof /tmp/big 4K
prof qg qgemm_wg $B/lily-gpu-test qgone 4096 8192 2048 128 3
safe_end
