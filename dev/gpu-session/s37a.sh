#!/usr/bin/env bash
# s37a.sh (device, ~3 min; written in the thirty-sixth session, not yet run): the fixed part of a decode launch.
# Prepare with `bash dev/gpu-session/ab_prep.sh dev/patches/gemv2-parts.patch` (the patched build carried; its
# knob LILY_CUDA_DEV_GV2 is timing only, wrong logits), then make sure .carry/cluster_probe is there (prep.sh).
#   1. dev/cluster/probe.cu: clusters of 2..16 resident at once, a barrier of 8 blocks by a global counter against
#      the cluster barrier, the floor of a launch in a PDL chain in a graph (empty / reading 8 KB of x).
#   2. gemv2's parts in the real 4K step (ncu medians of its launches): all; 1 no prologue; 4 no tile math;
#      5 neither; 8 the wait alone; and decode 4K with each (what the step loses to each part).
. .carry/common.sh; safe_start 300
synth_bg
timeout 60 $C/cluster_probe > $L/probe.txt 2>&1; el "probe rc=$?"; cat $L/probe.txt
wait $SP; el synth
ncu_envs gemv2 - LILY_CUDA_DEV_GV2=1 LILY_CUDA_DEV_GV2=4 LILY_CUDA_DEV_GV2=5 LILY_CUDA_DEV_GV2=8
AB_A=0 AB_B="1 4 5 8" AB_PAIRS=1 DEC_AB=4K dec_ab LILY_CUDA_DEV_GV2
safe_end
