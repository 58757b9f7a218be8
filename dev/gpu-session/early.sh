#!/usr/bin/env bash
# early.sh (device, ~4 min): decode launch-overlap switches. The early PDL trigger
# (LILY_CUDA_PDL_EARLY=1|2) and the expert down-matrix L2 prefetch (LILY_CUDA_MOE_PF=1): e2e (it
# checks the graph-replayed decode bitwise with each on and off), e2e with both as defaults, decode
# speed at 4K and 32K per variant (one process each, the baseline twice), and an Nsight Systems
# kernel summary + trace of 40 decode steps (when nsys is there). Uses /tmp/big when a previous
# script of the same call made it.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b /tmp/logs; [ -x /tmp/b/lily ] || tar xJf $C/bin.tar.xz -C /tmp/b
B=/tmp/b; L=/tmp/logs
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
[ -f /tmp/big/config.json ] || $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1
timeout 60 $B/lily-gpu-test e2e 17 > $L/e2e_early.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|early|prefetch|passed" $L/e2e_early.txt | cut -c1-200
LILY_CUDA_PDL_EARLY=1 LILY_CUDA_MOE_PF=1 timeout 60 $B/lily-gpu-test e2e 19 > $L/e2e_early1.txt 2>&1; el "e2e (both on) rc=$?"; grep -E "FAIL|passed" $L/e2e_early1.txt
for v in "0 0" "1 0" "2 0" "0 1" "1 1" "0 0"; do set -- $v
  LILY_CUDA_PDL_EARLY=$1 LILY_CUDA_MOE_PF=$2 timeout 50 $B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --decode ${DLENS:-4K,32K} --reps 3 --warmup 1 --out $L/early$1pf$2 2>&1 | grep -E "^decode " | sed "s/^/early=$1 pf=$2 /"
done
el bench
if command -v nsys > /dev/null; then
  ids=$(seq -s, 1 40)
  for v in "0 0" "1 1"; do set -- $v
    LILY_CUDA_PDL_EARLY=$1 LILY_CUDA_MOE_PF=$2 timeout 120 nsys profile --cuda-graph-trace=node -o /tmp/ns$1$2 --force-overwrite true $B/lily logits --model /tmp/big --ids $ids --step 1 --backend cuda --out /tmp/l.bin > $L/nsys$1$2.txt 2>&1
    nsys stats --report cuda_gpu_kern_sum --format csv -o $L/ks$1$2 /tmp/ns$1$2.nsys-rep > /dev/null 2>&1
    nsys stats --report cuda_gpu_trace --format csv -o $L/tr$1$2 /tmp/ns$1$2.nsys-rep > /dev/null 2>&1
    ls $L | grep -E "ks$1$2|tr$1$2"
  done
  el nsys
else echo "no nsys"; fi
