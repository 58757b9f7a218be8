#!/usr/bin/env bash
# fill.sh (device, ~4 min): dense prefill GEMMs on 64-row tiles where 128-row ones would fill under half
# the SMs (qgemm_fill_tile; LILY_CUDA_QG_FILL=0 is the old rule). Prefill kernel tests, e2e, HF fixtures,
# cli_prefill; prefill 256..32K alternating FILL 0 / 1; pfprof 4K with it.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks; pf_cli; wait $SP
env_ab LILY_CUDA_QG_FILL --model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1 --prefill 256,512,1K,2K,4K,32K
pf_prof 30
safe_end
