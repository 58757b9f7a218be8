#!/usr/bin/env bash
# s26c.sh (device, ~7 min): the build of 187c50c: the long sweep (64K, 128K; peak memory), prefill 4K four more
# times, and the ablation table at 512, 2K and 32K (`lily bench --ablate NAME`, one process each, single runs).
. .carry/common.sh; safe_start 585
synth_bg; wait $SP; el synth
LILY_COMMIT=187c50c PART=long bash $C/sweep.sh > $L/sweep_long.txt 2>&1; el "long sweep rc=$?"; grep -E "^(prefill|decode) |peak|Peak" $L/sweep_long.txt | head
for i in 1 2 3 4; do timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 2 --warmup 1 --decode none --prefill 4K --out $L/b4k$i 2>&1 | grep -E "^prefill "; done; el "4K x4"
for a in none gdn_inproj pf_side fused_dequant gpu_route gdn_chunked gdn_wg wgmma qg_rw qg_gt qg_wsw moe_tails flash fa_wg; do
  if [ $a = none ]; then ab=""; else ab="--ablate $a"; fi
  timeout 90 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,32K --decode none $ab --out $L/abl_$a 2>&1 | grep -E "^prefill " | awk -v a=$a '{printf "%s %s %s\n", a, $2, $3}' | paste -sd' '
done; el ablations
LILY_CUDA_CHUNK=4096 timeout 90 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,32K --decode none --out $L/abl_chunk 2>&1 | grep -E "^prefill " | awk '{printf "chunk4096 %s %s\n", $2, $3}' | paste -sd' '; el chunk
safe_end
