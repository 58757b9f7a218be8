#!/usr/bin/env bash
# s17e.sh (device, ~4 min; seventeenth session, fifth call): split-K for wide calls of short prompts
# (LILY_CUDA_QG_SPLITK=3: out_proj, o_proj, z up to 4096 columns where their 64-row tiles leave SMs
# idle) against the default (1): the full-size logits of a 300-token prompt both ways, e2e and the HF
# fixtures under 3, prefill 256 .. 2K alternating, pfprof 256 under 3.
. .carry/common.sh; synth_bg; safe_start 400
LILY_CUDA_QG_SPLITK=3 e2e_fix
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 1 3; do LILY_CUDA_QG_SPLITK=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_$v.f32 > $L/lg$v.txt 2>&1; el "logits splitk=$v rc=$?"; done
python3 $C/cmp_logits.py /tmp/lg_1.f32 /tmp/lg_3.f32 248320
for r in 1 2; do for v in 1 3; do
  LILY_CUDA_QG_SPLITK=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 3 --warmup 1 --prefill 256,512,1K,2K --decode none --out $L/ab_$v 2>&1 | grep -E "^prefill " | sed "s/^/splitk=$v /"
done; done; el bench
LILY_CUDA_QG_SPLITK=3 timeout 60 $B/lily-gpu-test pfprof /tmp/big 256 > $L/pfprof.txt 2>&1; el "pfprof rc=$?"
grep -E "^prefill of|\| (gdn|attn|moe)" $L/pfprof.txt | head -16
safe_end
