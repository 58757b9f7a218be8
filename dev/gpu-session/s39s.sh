#!/usr/bin/env bash
# s39s.sh (device, ~9.5 min; thirty-ninth session): the compute-sanitizer runs of e2e left open (racecheck and memcheck
# of `select` and `sample`, racecheck of `attn256` and `gdn_front`; s37s.sh's plan, on the landed build), plus
# racecheck of the two kernel families the session changed (gemv: the fused split; attn: the combine's loads at
# once), all at once, 520 s each.
. .carry/common.sh; export SAN_LIMIT=520; safe_start 560
for t in racecheck memcheck; do
    san_bg $t $L/${t}_select.txt e2e 19 LILY_GPU_E2E=select
    san_bg $t $L/${t}_sample.txt e2e 19 LILY_GPU_E2E=sample LILY_GPU_SAMPLE_N=300
done
san_bg racecheck $L/racecheck_attn256.txt e2e 19 LILY_GPU_E2E=attn256
san_bg racecheck $L/racecheck_gdn_front.txt e2e 19 LILY_GPU_E2E=gdn_front
san_bg racecheck $L/racecheck_k_gemv.txt kernels 23 LILY_GPU_KERNELS=gemv
san_bg racecheck $L/racecheck_k_attn.txt kernels 23 LILY_GPU_KERNELS=attn
san_wait
for g in select sample; do for t in racecheck memcheck; do san_report $L/${t}_$g.txt "$t $g"; done; done
for g in attn256 gdn_front k_gemv k_attn; do san_report $L/racecheck_$g.txt "racecheck $g"; done
safe_end
