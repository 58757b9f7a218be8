#!/usr/bin/env bash
# final.sh (device): validate a candidate build (.carry/bin.tar.xz) against the known-good one
# (.carry/bin_old.tar.xz): prefill kernel tests with timings, memcheck + racecheck of the prefill
# kernels (small), e2e; the candidate is used only if all pass. Then with the chosen build: the
# prefill breakdown at 4K and the lily bench sweep 256..32K (3 reps) and 64K,128K (1 rep), JSON to
# $OUT (the long points first). FUZZ_S: fuzz on the spare cores meanwhile (fuzz.sh).
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0 LILY_COMMIT=${LILY_COMMIT:-unknown}
mkdir -p /tmp/b /tmp/bo /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b && tar xJf $C/bin_old.tar.xz -C /tmp/bo
L=/tmp/logs
[ -n "${FUZZ_S:-}" ] && [ -f $C/fuzz.sh ] && bash $C/fuzz.sh $FUZZ_S &
( sleep ${SAFE_S:-450}; tar czf $OUT/logs.tgz -C /tmp logs ) & SAFE=$!
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( /tmp/b/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) & SP=$!
ok=1
timeout 100 /tmp/b/lily-gpu-test prefill 21 > $L/prefill.txt 2>&1 || ok=0; el "prefill ok=$ok"
grep -E "FAIL|passed|gdn prefill chunked hk=16" $L/prefill.txt | cut -c1-220; grep -E "^\| (scan|chunked|attention) " $L/prefill.txt
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/lily-gpu-test prefill 22 small > $L/memcheck.txt 2>&1 || ok=0
el "memcheck ok=$ok"; tail -1 $L/memcheck.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/lily-gpu-test prefill 23 small > $L/racecheck.txt 2>&1; rr=$?
el "racecheck rc=$rr"; tail -2 $L/racecheck.txt; [ $rr = 0 ] || [ $rr = 124 ] || ok=0
timeout 60 /tmp/b/lily-gpu-test e2e 24 > $L/e2e.txt 2>&1 || ok=0; el "e2e ok=$ok"; grep -E "FAIL|passed" $L/e2e.txt
B=/tmp/b; [ $ok = 1 ] || { B=/tmp/bo; echo "CANDIDATE FAILED: sweep with the old build"; }
wait $SP
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot"
timeout 150 $BB --lengths 64K,128K --reps 1 --warmup 0 --out $OUT/cuda-long 2>&1 | grep -v upload; el long
timeout 150 $BB --lengths 256,512,1K,2K,4K,8K,16K,32K --reps 3 --warmup 1 --out $OUT/cuda-short 2>&1 | grep -v upload; el short
kill $SAFE; wait
tar czf $OUT/logs.tgz -C /tmp logs $( [ -d /tmp/corp ] && echo corp )
