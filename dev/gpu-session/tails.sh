#!/usr/bin/env bash
# tails.sh (device, ~4 min): the MoE groups' tails on 64-row tiles (moe_pf_tails; LILY_CUDA_MOE_TAILS) and
# narrow dense GEMMs on 64-row tiles (qgemm_fill_tile; LILY_CUDA_QG_FILL). Prefill kernel tests, e2e, HF
# fixtures, cli_prefill; prefill 4K/8K/32K alternating tails 0 / 1; pfprof 4K with both on.
. .carry/common.sh; synth_bg; safe_start 560
pf_checks; grep -E "tails on" $L/prefill.txt | cut -c1-200 | head -8
pf_cli; wait $SP
env_ab LILY_CUDA_MOE_TAILS --model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1 --prefill 4K,8K,32K
pf_prof 12
safe_end
