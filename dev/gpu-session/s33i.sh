#!/usr/bin/env bash
# s33i.sh (device, ~5 min): moe_fused's gate/up/down rows requested by warp 0 right after its top-k, not after
# the block barrier that also waits for the other warps' loads (bitwise the same). Against s33g.sh's build
# (lily_old): kernel tests, e2e, HF fixtures, the full-size checkpoint's 24 decode steps (cmp), moe_fused's
# duration by ncu (120 launches), decode 4K / 32K alternating, three pairs.
. .carry/common.sh; safe_start 420
synth_bg
kernels_grep "^FAIL"
e2e_fix
wait $SP; el synth
ab_old; xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
timeout 90 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/l_old.f32 > $L/l_old.txt 2>&1; el "logits old rc=$?"
timeout 90 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/l_new.f32 > $L/l_new.txt 2>&1; el "logits new rc=$?"
cmp /tmp/l_old.f32 /tmp/l_new.f32 && echo "full-size decode logits (24 steps): new == old, bitwise"
for v in old new; do
  bin=/tmp/gt_old; [ $v = new ] && bin=$B/lily-gpu-test
  timeout 100 ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum -k regex:moe_fused --csv --print-units base \
    $bin prof /tmp/big > $L/ncu_$v.csv 2> $L/ncu_$v.err; el "ncu $v rc=$?"
  python3 -c "
import csv,statistics as s
r=[x for x in csv.reader(l for l in open('$L/ncu_$v.csv') if l.startswith('\"'))]
h=r[0]; v=[float(x[h.index('Metric Value')].replace(',','')) for x in r[1:]]
print('$v moe_fused ns: n=%d median %.0f mean %.0f min %.0f' % (len(v), s.median(v), s.mean(v), min(v)))"
done
AB_N=3 ab_bench 100 --model /tmp/big --backend cuda --no-plot --prefill none --decode 4K,32K --reps 2 --warmup 1
safe_end
