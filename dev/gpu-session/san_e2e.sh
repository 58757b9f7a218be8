#!/usr/bin/env bash
# san_e2e.sh TOOL[,TOOL] GROUP... (device): compute-sanitizer (racecheck, memcheck) of e2e's groups (LILY_GPU_E2E:
# base, select, sample, moe, attn256, pf_side, qg_rw, gdn_inproj, gdn_front), every (tool, group) as its own process, all at once (a
# run of the whole suite in sequence does not fit a call's 600 s); SAN_LIMIT seconds each (default 500). Prints a
# line per run: PASS/FAIL counts, the suite's summary, the sanitizer's summary, the exit status (124: cut).
. .carry/common.sh; safe_start $(( ${SAN_LIMIT:-500} + 40 ))
IFS=, read -ra tools <<< "$1"; shift
for t in "${tools[@]}"; do for g in "$@"; do san_bg $t $L/${t}_$g.txt e2e 19 LILY_GPU_E2E=$g; done; done
san_wait
for t in "${tools[@]}"; do for g in "$@"; do san_report $L/${t}_$g.txt "$t $g"; done; done
safe_end
