#!/usr/bin/env bash
# s15i.sh (device, ~9 min; fifteenth session, ninth call: the closing checks of main 6276834). Prefill
# tests, e2e, HF fixtures; full-size logits against the session's base (at the noise floor, s15c); the
# prefill sweep with a decode point at 4K; pfprof 64K; sanitizers of the small prefill tests; demo
# fidelity on CUDA.
. .carry/common.sh; synth_bg; safe_start 570; ab_old; export LILY_COMMIT=6276834
timeout 240 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -A12 "GDN prefill (Hv" $L/prefill.txt | grep chunked
timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_new.f32 > $L/lgn.txt 2>&1; el "new logits rc=$?"
python3 .carry/cmp_logits.py /tmp/lg_old.f32 /tmp/lg_new.f32 248320
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode 4K --reps 1 --warmup 1 --out $OUT/cuda-prefill > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
timeout 90 $B/lily-gpu-test pfprof /tmp/big 4K,64K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "plain|\|" $L/pfprof.txt | head -60
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
LILY_GPU_PF=gdn timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
demo_fid
safe_end
