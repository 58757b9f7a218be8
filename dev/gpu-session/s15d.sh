#!/usr/bin/env bash
# s15d.sh (device, ~4 min; fifteenth session, fourth call): the chunked GDN's k-loops unrolled by 1 (the
# last call's build), 2 and 4 (this build's default): GDN timing table each, the GDN tests of each
# with one seed (the same products in the same order: their lines must be identical), then pfprof 4K
# and prefill of the base and this build alternating.
. .carry/common.sh; synth_bg; safe_start 400; ab_old
for u in 1 2; do xz -dc $C/gt$u.xz > /tmp/gt$u && chmod +x /tmp/gt$u; done; cp $B/lily-gpu-test /tmp/gt4
for u in 1 2 4; do
  LILY_GPU_PF=gdn timeout 120 /tmp/gt$u prefill 11 > $L/gdn$u.txt 2>&1; el "unroll $u rc=$? $(grep -E 'passed' $L/gdn$u.txt | tail -1)"
  grep -E "^\| chunked \| 4096" $L/gdn$u.txt | sed "s/^/unroll $u /"
  grep -E "PASS|FAIL" $L/gdn$u.txt | sed 's/^[A-Z]* //' > $L/lines$u.txt
done
for u in 2 4; do cmp -s $L/lines1.txt $L/lines$u.txt && echo "unroll $u: test lines identical to unroll 1" || echo "unroll $u: lines DIFFER"; done
grep -c FAIL $L/gdn4.txt
wait $SP; el synth
pf_prof 8
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none
safe_end
