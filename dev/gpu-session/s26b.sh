#!/usr/bin/env bash
# s26b.sh (device, ~9.5 min): the build of 187c50c (the GDN in_proj stacked): the short sweep (256..32K, JSON
# to $OUT), pfprof at 4K and 64K, prefill 4K with the side stream at the main stream's priority, then the whole
# prefill suite (the MoE references on the CPU pool since 016cc70) in what is left, and memcheck of its small set.
. .carry/common.sh; safe_start 585
synth_bg; wait $SP; el synth
LILY_COMMIT=187c50c PART=short bash $C/sweep.sh > $L/sweep.txt 2>&1; el "sweep rc=$?"; grep -E "^(prefill|decode) " $L/sweep.txt | head -20
timeout 150 $B/lily-gpu-test pfprof /tmp/big 4K,64K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "plain|^\|" $L/pfprof.txt | head -60
LILY_CUDA_PF_SIDE=2 timeout 80 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --decode none --prefill 4K --out $L/bside2 2>&1 | grep -E "^prefill " | sed "s/^/side2 /"; el "rc=$?"
left=$(( 560 - ($(date +%s) - t0) - 40 ))
timeout $left $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$? (limit $left s)"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
echo "PASS lines: $(grep -c "^PASS" $L/prefill.txt), FAIL lines: $(grep -c "^FAIL" $L/prefill.txt)"; tail -2 $L/prefill.txt | cut -c1-200
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
safe_end
