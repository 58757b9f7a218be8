#!/usr/bin/env bash
# close3.sh (device, ~8 min): the tenth session's closing call. The carried build against the session's
# base (.carry/lily_old.xz, fd1baa4): full-size prefill logits of a 300-token prompt bitwise equal (the
# register-resident conv / norm passes and the side stream change no bits), then the checks of close.sh
# (kernels, prefill, e2e, fixtures, cli_prefill, demo fidelity, memcheck, racecheck of the MoE kernels),
# old/new alternating (prefill 512, 4K, 32K; decode 4K), pfprof 4K, and both sweeps.
. .carry/common.sh; synth_bg; safe_start 545; ab_old
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head
pf_checks
pf_cli
demo_fid
san_checks
wait $SP; el synth
cmp_old_logits
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode 4K
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -24
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dsweep 2>&1 | grep -E "^decode |^#|tok/s" | head -8; el "decode sweep"
safe_end
