#!/usr/bin/env bash
# small.sh (device, ~1.5 min): short prompts with the shared-memory epilogue against the register one
# (LILY_QG_EPI_REGS=1, timing only), alternating; pfprof 64K.
. .carry/common.sh; synth_bg; safe_start 200; wait $SP
for v in 0 1 0 1; do LILY_QG_EPI_REGS=$v timeout 60 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill 256,512,1K --decode none --reps 3 --warmup 1 --out $L/b$v 2>&1 | grep -E "^prefill " | sed "s/^/epi_regs=$v /"; done; el bench
timeout 100 $B/lily-gpu-test pfprof /tmp/big 64K > $L/pf64.txt 2>&1; el pfprof; grep -v upload $L/pf64.txt | head -24
safe_end
