#!/usr/bin/env bash
# profile.sh (device): kernel tests, then on the full-size synthetic model: the prefill per-phase
# breakdown (lily-gpu-test pfprof) at 4K and 64K, the decode run of `lily-gpu-test full` (long greedy
# generation, decode speed, per-kernel breakdown, decode ablations), and the prefill ablation table at
# 512/2K/32K (lily bench, one switch or knob changed per run). Optional FUZZ_S: fuzz on spare cores.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b
B=/tmp/b; L=/tmp/logs
[ -n "${FUZZ_S:-}" ] && [ -f $C/fuzz.sh ] && bash $C/fuzz.sh $FUZZ_S &
( sleep ${SAFE_S:-565}; tar czf $OUT/logs.tgz -C /tmp logs ) & SAFE=$!
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) & SP=$!
timeout 90 $B/lily-gpu-test kernels 11 > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|attn.*multi" $L/kernels.txt | cut -c1-160
timeout 60 $B/lily-gpu-test e2e 12 > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-160
wait $SP
timeout 100 $B/lily-gpu-test pfprof /tmp/big 4K,64K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; cat $L/pfprof.txt | grep -v upload
timeout 170 $B/lily-gpu-test full /tmp/big > $L/full.txt 2>&1; el "full rc=$?"; grep -v upload $L/full.txt | grep -E "^\||PASS|FAIL|bandwidth"
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --decode none --reps 2 --warmup 1"
ab() { local name=$1; shift; env "$@" timeout 60 $BB --prefill ${LENS:-512,2K,32K} --out $L/ab_$name 2>&1 | grep -E "^prefill " | sed "s/^/$name /"; }
ab default LILY_LOG=0; ab noflash LILY_CUDA_FA=0; ab nogdnchunked LILY_CUDA_GDN_CHUNKED=0
ab chunk1024 LILY_CUDA_CHUNK=1024; ab chunk256 LILY_CUDA_CHUNK=256
ab tile32 LILY_CUDA_QG_TILE=32; ab tile64 LILY_CUDA_QG_TILE=64; ab tile128 LILY_CUDA_QG_TILE=128
ab hostroute LILY_CUDA_HOST_ROUTE=1; ab sepdequant LILY_CUDA_SEP_DEQUANT=1
LENS=512,2K ab tokenwise LILY_CUDA_PREFILL=0
el ablations; kill $SAFE; wait
tar czf $OUT/logs.tgz -C /tmp logs $( [ -d /tmp/corp ] && echo corp )
