#!/usr/bin/env bash
# s29d.sh (device, ~2-4 min): gdn_out (LILY_CUDA_GDN_OUT, with LILY_CUDA_MOE_ACC): the kernel tests (gdn_out, the
# router's fold, their timing lines), e2e and the HF fixtures, the per-kernel table with it off and on
# (lily-gpu-test prof), decode at 4K alternating (AB_PAIRS pairs). The session ran its forms as s29d .. s29h.
. .carry/common.sh; safe_start 400
synth_bg
kernels_grep "gdn \+ gated|timing rows=(1281|12352) "
e2e_fix; grep -E "^FAIL|fixed-point|front" $L/e2e.txt | cut -c1-330
wait $SP; el synth
prof_ab LILY_CUDA_GDN_OUT "gdn|moe|total"
AB_PAIRS=${AB_PAIRS:-3} dec_ab LILY_CUDA_GDN_OUT
safe_end
