#!/usr/bin/env bash
# gdnc.sh (device, ~2.5 min): the chunked GDN with its conv in a kernel of its own (gdn_conv_all)
# and the 3xTF32 split by truncation: prefill kernel tests (chunked vs the scan and the CPU
# reference), e2e, HF fixtures, memcheck of the small prefill tests; pfprof 4K; lily bench prefill.
. .carry/common.sh; synth_bg; safe_start 400
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head -20; grep -iE "chunked" $L/prefill.txt | cut -c1-200 | head -12
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -30
timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench 2>&1 | grep -E "^prefill "; el bench
safe_end
