#!/usr/bin/env bash
# s14a.sh (device, ~7 min; fourteenth session, first call). The wide bf16-weight tile warp-specialised
# (qgemm_wsw.cu, LILY_CUDA_QG_WSW): a hang check and qgone against qgemm_wg.cu's wide tile (WG 5 vs 8),
# sanitizers on one small call, the prefill kernel tests, the full-size logits bitwise across the
# switch and against the session's base, then prefill with the switch alternating and pfprof 4K.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
timeout 20 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/q0.txt 2>&1; rc=$?; el "qgone small wsw rc=$rc"; cat $L/q0.txt | tail -2
if [ $rc -ne 0 ]; then safe_end; exit 1; fi
for s in "4096 8192 2048" "4096 12352 2048" "4096 2048 4096" "16384 8192 2048" "1024 8192 2048" "4096 1024 2048"; do
  for w in 5 8 5 8; do timeout 20 $B/lily-gpu-test qgone $s 128 $w 2>&1 | grep qgone; done
done; el qgone
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/mc.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/mc.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/rc.txt 2>&1; el "racecheck rc=$?"; tail -2 $L/rc.txt
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $B/lily-gpu-test qgone 200 600 1024 128 8 > $L/sc.txt 2>&1; el "synccheck rc=$?"; tail -1 $L/sc.txt
timeout 240 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "warp-specialised).*bitwise equal; swapped.*wide tile: bitwise equal" $L/prefill.txt
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
for v in 0 1; do LILY_CUDA_QG_WSW=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits wsw=$v rc=$?"; done
cmp /tmp/lg_old.f32 /tmp/lg_0.f32 && echo "wsw=0: bitwise equal to the base"; cmp /tmp/lg_0.f32 /tmp/lg_1.f32 && echo "wsw=1: bitwise equal to wsw=0"
env_ab LILY_CUDA_QG_WSW --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,4K,32K --decode none
for v in 0 1; do LILY_CUDA_QG_WSW=$v timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; el "pfprof wsw=$v"; grep -E "plain|qkv|out_proj|\| z|shared|q\|gate|gate\|up" $L/pfprof$v.txt | head -12; done
safe_end
