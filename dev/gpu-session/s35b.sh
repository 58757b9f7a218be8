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
    LILY_BIN=$bin LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo_$v.txt 2>&1; el "demo fidelity $v rc=$?: $(tail -1 $L/demo_$v.txt)"
    timeout 60 $bin ppl --model models/demo --tokens tests/fixtures/demo-fidelity/ids.txt --backend cuda --json $L/ppl_$v.json > /dev/null 2>&1
    python3 -c "
import json; r=json.load(open('$L/ppl_$v.json')); f=json.load(open('tests/fixtures/demo-fidelity/hf_ref.json'))
a=sum(p['top1']==t for p,t in zip(r['positions'],f['top1']))
print('$v: ppl %.4f (HF %.4f), top-1 agreement %d/%d' % (r['ppl'], f['ppl'], a, len(r['positions'])))"
done
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
timeout 90 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/l_old.f32 > /dev/null 2>&1
LILY_CUDA_GEMV2=0 timeout 90 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/l_old0.f32 > /dev/null 2>&1
timeout 90 $B/lily logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/l_new.f32 > /dev/null 2>&1; el logits
echo -n "old gemv2 vs old first kernel: "; python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_old0.f32 248320
echo -n "new vs old: "; python3 $C/cmp_logits.py /tmp/l_old.f32 /tmp/l_new.f32 248320
S=${SAN_LIMIT:-430}
for t in racecheck memcheck; do
    for f in gemv moe; do
        ( LILY_GPU_KERNELS=$f timeout $S compute-sanitizer --tool $t --error-exitcode 9 $B/lily-gpu-test kernels 23 > $L/k_${t}_$f.txt 2>&1; echo "rc=$?" >> $L/k_${t}_$f.txt ) &
    done
    for g in select attn256; do
        ( LILY_GPU_E2E=$g timeout $S compute-sanitizer --tool $t --error-exitcode 9 $B/lily-gpu-test e2e 19 > $L/e_${t}_$g.txt 2>&1; echo "rc=$?" >> $L/e_${t}_$g.txt ) &
    done
done
wait; el sanitizers
for f in $L/k_*.txt $L/e_*.txt; do
    echo "== $(basename $f .txt): $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL; $(grep -E 'passed, ' $f | tail -1); $(grep -E 'SUMMARY' $f | tail -1); $(tail -1 $f)"
    grep -E "^FAIL|hazard|Error" $f | grep -v SUMMARY | head -4 | cut -c1-200
done
safe_end
