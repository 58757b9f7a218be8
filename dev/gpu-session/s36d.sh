#!/usr/bin/env bash
# s36d.sh (device, ~2 min): gdn_front_kernel's fixed part (LILY_CUDA_DEV_GF, dev knob, wrong logits): 15 = no
# copies, math, barrier or step (the launch, the step's preloads, the prologue); + 16 its dynamic shared memory
# cut to x's arrays; + 32 no preloads; ncu medians of the 90 launches in the real 4K step.
. .carry/common.sh; safe_start 200
synth_bg; wait $SP; el synth
ncu_envs gdn_front_kernel LILY_CUDA_DEV_GF=15 LILY_CUDA_DEV_GF=31 LILY_CUDA_DEV_GF=47 LILY_CUDA_DEV_GF=63 LILY_CUDA_DEV_GF=5 LILY_CUDA_DEV_GF=21 LILY_CUDA_DEV_GF=32
safe_end
