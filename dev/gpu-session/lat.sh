#!/usr/bin/env bash
# lat.sh (device, ~6 min; branch decode-lat): the decode latency variants (LILY_CUDA_MOE_LAT,
# LILY_CUDA_GDN_LAT, LILY_CUDA_GV2_PRE; same results bitwise). Kernel tests (they compare each
# variant with the default bitwise), e2e and HF fixtures with all on, memcheck of the kernels, decode
# speed at 4K and 32K per variant, then `lily-gpu-test chain` (rows for each variant), and the chain
# again from a `make TRACE=1` build when prep.sh carried one (per-phase cycles inside each kernel).
. .carry/common.sh; synth_bg
timeout 100 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|latency|passed" $L/kernels.txt | cut -c1-220
export LILY_CUDA_MOE_LAT=1 LILY_CUDA_GDN_LAT=1 LILY_CUDA_GV2_PRE=1
timeout 60 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e (all on) rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-220
FIX=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
LILY_GPU_HF_BF16=tests/gpu/hf_bf16 timeout 150 $B/lily-gpu-test fixtures $FIX > $L/fixtures.txt 2>&1; el "fixtures (all on) rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
unset LILY_CUDA_MOE_LAT LILY_CUDA_GDN_LAT LILY_CUDA_GV2_PRE
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test kernels 29 > $L/memcheck.txt 2>&1; el "memcheck kernels rc=$?"; grep -E "FAIL|passed|ERROR SUMMARY" $L/memcheck.txt
wait $SP
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --prefill none --reps 3 --warmup 1"
for v in "0 0 0" "1 0 0" "0 1 0" "0 0 1" "1 1 1" "0 0 0" "1 1 1"; do set -- $v
  LILY_CUDA_MOE_LAT=$1 LILY_CUDA_GDN_LAT=$2 LILY_CUDA_GV2_PRE=$3 timeout 60 $BB --decode 4K,32K --out $L/lat$1$2$3 2>&1 | grep -E "^decode " | sed "s/^/moe_lat=$1 gdn_lat=$2 gv2_pre=$3 /"
done
el bench
timeout 200 $B/lily-gpu-test chain > $L/chain.txt 2>&1; el "chain rc=$?"; grep -E "^\|" $L/chain.txt
if [ -f $C/bin-trace.tar.xz ]; then # where inside each kernel the time goes (a TRACE=1 build)
  mkdir -p /tmp/bt && tar xJf $C/bin-trace.tar.xz -C /tmp/bt
  timeout 200 /tmp/bt/lily-gpu-test chain > $L/chain_trace.txt 2>&1; el "chain (trace) rc=$?"; grep -E "^\||trace" $L/chain_trace.txt
fi
