#!/usr/bin/env bash
# s15k.sh (device, ~10 s; fifteenth session, eleventh call): dev/mma/mma_rate, the latency and the rate of
# mma.sync m16n8k8 TF32 (phase B's MMA) and m16n8k16 bf16 on the H200.
. .carry/common.sh
timeout 60 $C/mma_rate
