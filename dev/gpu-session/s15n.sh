#!/usr/bin/env bash
# s15n.sh (device, ~3 min; fifteenth session, fourteenth call): the prefill ablation table of main (21ac740)
# at 512, 2K and 32K tokens: the defaults, then each switch of #6 off in its own process (fused
# dequantisation, GPU routing, the chunked GDN, wgmma, the warp-specialised wide tile, the merged MoE
# tails), and the prefill chunk at 4096 tokens.
. .carry/common.sh; synth_bg; safe_start 260; wait $SP; el synth
P="--model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,32K --decode none"
timeout 60 $B/lily bench $P --out $L/def 2>&1 | grep -E "^prefill " | sed "s/^/default /"; el default
for f in fused_dequant gpu_route gdn_chunked wgmma qg_wsw moe_tails; do
  timeout 60 $B/lily bench $P --ablate $f --out $L/$f 2>&1 | grep -E "^prefill " | sed "s/^/$f-off /"; el $f
done
LILY_CUDA_CHUNK=4096 timeout 60 $B/lily bench $P --out $L/c4k 2>&1 | grep -E "^prefill " | sed "s/^/chunk4096 /"; el chunk
safe_end
