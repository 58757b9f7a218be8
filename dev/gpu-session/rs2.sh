#!/usr/bin/env bash
# rs2.sh (device, ~2.5 min): the swapped-operand GEMM with 4 warpgroups (256 weight rows) a block,
# so each activation tile is copied from L2 half as often: prefill tests (every case through it),
# e2e with it on, qgone bf16w (WG 3) vs rs at 4 and 2 warpgroups, timing-only ablations at 4,
# lily bench prefill off/on alternating, pfprof 4K with it on.
. .carry/common.sh; synth_bg; safe_start 400
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-230 | head -20
LILY_CUDA_QG_RS=1 timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e (rs) rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
for s in "4096 8192 2048" "4096 2048 4096" "256 8192 2048" "1024 1024 2048"; do for t in 64 128; do
  timeout 20 $B/lily-gpu-test qgone $s $t 3 | grep qgone
  for w in 4 2; do echo "wgs=$w $(LILY_QG_RS_WGS=$w timeout 20 $B/lily-gpu-test qgone $s $t 4 | grep qgone)"; done; done; done
for ab in 1 2 7 8; do echo "wgs=4 abl=$ab $(LILY_QG_RS_ABL=$ab timeout 20 $B/lily-gpu-test qgone 4096 8192 2048 128 4 | grep qgone)"; done; el qgone
wait $SP
for v in 0 1 0 1; do LILY_CUDA_QG_RS=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 512,2K,4K,32K --decode none --reps 2 --warmup 1 --out $L/bench$v 2>&1 | grep -E "^prefill " | sed "s/^/rs=$v /"; done; el bench
LILY_CUDA_QG_RS=1 timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -16
safe_end
