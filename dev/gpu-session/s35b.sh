#!/usr/bin/env bash
# s35b.sh (device, ~9.5 min): checks of s35a's integer-MMA gv2_tile that are not timings.
# 1. The trained demo model against HF (tests/py/test_demo_fidelity.py on CUDA) by the build before and this one,
#    with each run's top-1 agreement and perplexity.
# 2. How far two valid GPU paths of the build before are apart on the full-size random checkpoint's 24 decode
#    steps (gemv2 against the first GEMV kernel, LILY_CUDA_GEMV2=0), beside this build against the build before.
# 3. compute-sanitizer (racecheck, memcheck) of the gemv and moe kernel families and of e2e's select and attn256
#    groups, all at once (SAN_LIMIT 430 s each).
. .carry/common.sh; safe_start 575
synth_bg
ab_old
for v in old new; do
    bin=/tmp/lily_old; [ $v = new ] && bin=$B/lily
    demo_fid $bin _$v
    timeout 60 $bin ppl --model models/demo --tokens tests/fixtures/demo-fidelity/ids.txt --backend cuda --json $L/ppl_$v.json > /dev/null 2>&1
    python3 -c "
import json; r=json.load(open('$L/ppl_$v.json')); f=json.load(open('tests/fixtures/demo-fidelity/hf_ref.json'))
a=sum(p['top1']==t for p,t in zip(r['positions'],f['top1']))
print('$v: ppl %.4f (HF %.4f), top-1 agreement %d/%d' % (r['ppl'], f['ppl'], a, len(r['positions'])))"
done
wait $SP; el synth
decode_logits old /tmp/lily_old
decode_logits old0 /tmp/lily_old LILY_CUDA_GEMV2=0
decode_logits new $B/lily
echo -n "old gemv2 vs old first kernel: "; python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_old0.f32 248320
echo -n "new vs old: "; python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_new.f32 248320
export SAN_LIMIT=${SAN_LIMIT:-430}
for t in racecheck memcheck; do
    for f in gemv moe; do san_bg $t $L/k_${t}_$f.txt kernels 23 LILY_GPU_KERNELS=$f; done
    for g in select attn256; do san_bg $t $L/e_${t}_$g.txt e2e 19 LILY_GPU_E2E=$g; done
done
san_wait
for f in $L/k_*.txt $L/e_*.txt; do san_report $f $(basename $f .txt); done
safe_end
