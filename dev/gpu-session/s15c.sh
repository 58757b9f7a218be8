#!/usr/bin/env bash
# s15c.sh (device, ~3 min; fifteenth session, third call). Nsight Compute of the chunked GDN's phase A and
# B (the first GDN layer of a 4K prefill; details and source counters to $OUT), and the noise floor of
# the full-size logits comparison: the base's logits with the scan instead of the chunked form, against
# the base's own (a GDN change of fp32 size, through 40 layers of bf16 activations).
. .carry/common.sh; synth_bg; safe_start 300; ab_old
wait $SP
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
LILY_CUDA_GDN_CHUNKED=0 timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_scan.f32 > $L/lgs.txt 2>&1; el "old logits, scan rc=$?"
python3 .carry/cmp_logits.py /tmp/lg_old.f32 /tmp/lg_scan.f32 248320 | sed 's/^/base chunked vs base scan: /'
timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_new.f32 > $L/lgn.txt 2>&1; el "new logits rc=$?"
python3 .carry/cmp_logits.py /tmp/lg_scan.f32 /tmp/lg_new.f32 248320 | sed 's/^/base scan vs new chunked: /'
timeout 200 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy -k regex:gdn_chunk --launch-count 2 --import-source yes -o /tmp/ncu_g $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 0 --prefill 4K --decode none > $L/ncu_g.log 2>&1; el "ncu rc=$?"
timeout 60 ncu -i /tmp/ncu_g.ncu-rep --page details > $OUT/details_g.txt 2>&1
grep -E "gdn_chunk|Duration|Throughput|Issue|Warp Cycles|highest-utilized|Achieved Occ" $OUT/details_g.txt | head -40
timeout 60 ncu -i /tmp/ncu_g.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src_g.csv 2>/dev/null; xz -9 $OUT/src_g.csv
safe_end
