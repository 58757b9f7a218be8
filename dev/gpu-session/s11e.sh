#!/usr/bin/env bash
# s11e.sh (device, ~9 min; the eleventh session's closing call). The final build against the session's
# base (.carry/lily_old.xz, f2679f2): every check (kernels with the top-k, prefill with the rastered
# GEMMs, e2e with the top-k and sampling steps, fixtures, cli_prefill, demo fidelity, memcheck,
# racecheck of the MoE kernels), full-size prefill logits bitwise equal to the base, prefill/decode
# A/B, the server's decode per sampling setting (base and final alternating), pfprof 4K, both sweeps.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
timeout 90 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed" $L/kernels.txt | cut -c1-200 | head
pf_checks
grep -E "sampling step|top-k step" $L/e2e.txt | cut -c1-200
pf_cli
LILY_BIN=$B/lily LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo.txt 2>&1; el "demo fidelity (cuda) rc=$?"; tail -1 $L/demo.txt
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/memcheck_topk.txt 2>&1; el "memcheck topk rc=$?"; tail -1 $L/memcheck_topk.txt
LILY_GPU_KERNELS=topk timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 5 > $L/racecheck_topk.txt 2>&1; el "racecheck topk rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck_topk.txt | head -3
LILY_GPU_KERNELS=moe timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 31 > $L/racecheck.txt 2>&1; el "racecheck moe rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck.txt | head -3
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_new.f32 > $L/lgn.txt 2>&1; el "new logits rc=$?"
cmp /tmp/lg_old.f32 /tmp/lg_new.f32 && echo "full-size prefill logits (300 tokens): bitwise equal to the session's base"
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode 4K
xz -dc $C/tok/tokenizer.json.xz > /tmp/big/tokenizer.json && cp $C/tok/tokenizer_config.json /tmp/big/
for bin in /tmp/lily_old $B/lily /tmp/lily_old $B/lily; do
  lb=$([ $bin = $B/lily ] && echo new || echo old)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 timeout 120 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -26
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $L/sweep 2>&1 | grep -E "^prefill |^#|tok/s" | head -14; el sweep
timeout 150 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode 256,4K,32K,128K --reps 3 --warmup 1 --out $L/dsweep 2>&1 | grep -E "^decode |^#|tok/s" | head -8; el "decode sweep"
safe_end
