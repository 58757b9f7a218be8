#!/usr/bin/env bash
# s21f.sh (device, ~8 min; twenty-first session, call 6): the MoE gate|up's 192-row tile (qgemm_wg.cu, 3
# warpgroups, tensor maps) with one block barrier a stage instead of three (LILY_QG_ONEB, default on: three
# B buffers, each dequantising thread copies its own scale words). Its MoE passes both ways first, then the
# MoE block and prefill 1K .. 32K with and without it, alternating; then the whole prefill suite, e2e and
# the fixtures with the defaults, cli_prefill, and the closing sweep 256 .. 128K.
. .carry/common.sh; synth_bg; safe_start 560; export LILY_COMMIT=${LILY_COMMIT:-unknown}
LILY_GPU_PF=moeoneb timeout 100 $B/lily-gpu-test prefill $(date +%s) > $L/moeoneb.txt 2>&1; el "moeoneb rc=$?"; grep -E "FAIL|passed" $L/moeoneb.txt | cut -c1-200 | head -5
moe() { env "$@" LILY_CUDA_QG_GT=1 LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE \|" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_QG_ONEB=0; moe LILY_QG_ONEB=1; done; el moe
wait $SP; el synth
for i in 1 2; do for cfg in "LILY_QG_ONEB=0" "LILY_QG_ONEB=1"; do
  env $cfg timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 1K,2K,4K,8K,32K --decode none --reps 2 --warmup 1 --out $L/ab 2>&1 | grep -E "^prefill " | sed "s/^/$cfg /"
done; done; el bench
pf_checks
pf_cli
timeout 200 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K,2K,4K,8K,16K,32K,64K,128K --decode none --reps 1 --warmup 1 --out $OUT/cuda-sweep > $L/sweep.txt 2>&1; el "sweep rc=$?"
grep -E "^(prefill|decode) |ceiling|peak" $L/sweep.txt
safe_end
