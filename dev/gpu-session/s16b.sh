#!/usr/bin/env bash
# s16b.sh (device, ~4 min; sixteenth session, second call): what bounds the persistent MoE GEMM
# (qgemm_wsp.cu). The MoE block at 4096 tokens (LILY_GPU_PF=moe lily-gpu-test prefill: random weights,
# the engine's GEMM defaults) with LILY_CUDA_QG_WSP 0 / 3 and with parts of the new kernel left out
# (LILY_WSP_ABL, timing only: 1 no X copies, 2 no dequantisation, 4 no MMAs); then Nsight Compute of
# the grouped GEMMs of one block call with 0 and 3 (details; source counters of 3 as CSV).
. .carry/common.sh; safe_start 560
moe() { env "$@" LILY_GPU_PF=moe timeout 60 $B/lily-gpu-test prefill 5 2>&1 | grep -E "^\| MoE" | sed "s/^/$* /"; }
for i in 1 2; do moe LILY_CUDA_QG_WSP=0; moe LILY_CUDA_QG_WSP=1; moe LILY_CUDA_QG_WSP=2; moe LILY_CUDA_QG_WSP=3; done
for a in 1 2 4 3 6 7; do moe LILY_CUDA_QG_WSP=3 LILY_WSP_ABL=$a; done; el moe
for v in 0 3; do
  LILY_CUDA_QG_WSP=$v LILY_GPU_PF=moe timeout 200 ncu --clock-control none --cache-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis $([ $v = 3 ] && echo --section SourceCounters --import-source yes) -k regex:"qgemm_(wsp|wg_kernel)" --launch-skip 0 --launch-count 4 -o /tmp/ncu_$v $B/lily-gpu-test prefill 5 > $L/ncu_$v.log 2>&1; el "ncu wsp=$v rc=$?"
  timeout 60 ncu -i /tmp/ncu_$v.ncu-rep --page details > $OUT/details_$v.txt 2>&1
  grep -E "^  [a-z_]*qgemm|Duration|Throughput|Pipe|Issue|Warp Cycles|Eligible|Bank" $OUT/details_$v.txt | head -80
done
timeout 60 ncu -i /tmp/ncu_3.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_3.csv 2>/dev/null; xz -9 $OUT/src_3.csv
safe_end
