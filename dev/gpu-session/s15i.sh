#!/usr/bin/env bash
# s15i.sh (device, ~9 min; fifteenth session, ninth call: the closing checks of main 6276834). Prefill
# tests, e2e, HF fixtures; full-size logits against the session's base (at the noise floor, s15c); the
# prefill sweep with a decode point at 4K; pfprof 64K; sanitizers of the small prefill tests; demo
# fidelity on CUDA.
. .carry/common.sh; synth_bg; safe_start 570; ab_old; export LILY_COMMIT=6276834
pf_checks
grep -A12 "GDN prefill (Hv" $L/prefill.txt | grep chunked
wait $SP; el synth
cmp_old_logits
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 4K --reps 1 --warmup 1 --out $OUT/cuda-prefill > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
timeout 90 $B/lily-gpu-test pfprof /tmp/big 4K,64K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "plain|\|" $L/pfprof.txt | head -60
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
LILY_GPU_PF=gdn timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
demo_fid
safe_end
