#!/usr/bin/env bash
# s33d.sh (device, ~4 min): does LILY_CUDA_DEV_ALIAS=4 (every layer reads layer 0's experts) with
# LILY_CUDA_DEV_MF_FIXED=1 (slot k takes expert k) really keep the step's 8 experts in L2? s32b read "no gain"
# from it as "the experts' DRAM fetch is not on the critical path"; that holds only if they were L2 hits.
# Nsight Compute, one pass (DRAM bytes and duration of every moe_fused and gemv2 launch of the per-kernel
# profile's steps, caches not flushed, clocks not locked), with and without the alias.
. .carry/common.sh; safe_start 330
synth_bg; wait $SP; el synth
for a in 0 4; do
  LILY_CUDA_DEV_MF_FIXED=1 LILY_CUDA_DEV_ALIAS=$a timeout 130 ncu --cache-control none --clock-control none \
    --metrics dram__bytes_read.sum,gpu__time_duration.sum -k regex:"moe_fused|gemv2" --csv --print-units base \
    $B/lily-gpu-test prof /tmp/big > $L/ncu_a$a.csv 2> $L/ncu_a$a.err; el "ncu alias=$a rc=$?"
  python3 - $L/ncu_a$a.csv $a <<'PY'
import csv, sys, statistics as st
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; ki, mi, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
d = {}
for r in rows[1:]:
    k = "moe_fused" if "moe_fused" in r[ki] else "gemv2"
    d.setdefault((k, r[mi]), []).append(float(r[vi].replace(",", "")))
for (k, m), v in sorted(d.items()):
    print(f"alias={sys.argv[2]} {k:10s} {m:26s} n={len(v):4d} median={st.median(v):.4g} mean={st.mean(v):.4g} min={min(v):.4g} max={max(v):.4g}")
PY
done
safe_end
