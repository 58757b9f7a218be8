#!/usr/bin/env bash
# s37s.sh (device, ~9.5 min; written in the thirty-seventh session, not yet run): the compute-sanitizer runs of e2e
# still open after the thirty-sixth session, part 1, all at once as six processes, 520 s each (san_e2e.sh's
# helpers): racecheck and memcheck of `select` and of `sample` (LILY_GPU_SAMPLE_N=300 draws a temperature instead of
# 3,000: its bound scales with N), racecheck of `attn256` (its memcheck is clean: 6/6) and of `gdn_front` (its
# memcheck is clean). Part 2 is s37t.sh. HEAD's own build: the carry's gt_old.xz (ab_prep.sh), not the patched one.
. .carry/common.sh; export SAN_LIMIT=520; safe_start 560
mkdir -p /tmp/head && xz -dc $C/gt_old.xz > /tmp/head/lily-gpu-test && chmod +x /tmp/head/lily-gpu-test; B=/tmp/head
for t in racecheck memcheck; do
    san_bg $t $L/${t}_select.txt e2e 19 LILY_GPU_E2E=select
    san_bg $t $L/${t}_sample.txt e2e 19 LILY_GPU_E2E=sample LILY_GPU_SAMPLE_N=300
done
san_bg racecheck $L/racecheck_attn256.txt e2e 19 LILY_GPU_E2E=attn256
san_bg racecheck $L/racecheck_gdn_front.txt e2e 19 LILY_GPU_E2E=gdn_front
san_wait
for g in select sample; do for t in racecheck memcheck; do san_report $L/${t}_$g.txt "$t $g"; done; done
san_report $L/racecheck_attn256.txt "racecheck attn256"
san_report $L/racecheck_gdn_front.txt "racecheck gdn_front"
safe_end
