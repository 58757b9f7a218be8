#!/usr/bin/env bash
# s12d.sh (device, ~8 min; twelfth session, the closing call's checks): the final build against the
# session's base (.carry/lily_old.xz, 568d60b): prefill tests, e2e, fixtures, cli_prefill, demo fidelity
# on CUDA, memcheck of the small prefill tests; full-size prefill logits bitwise equal to the base's;
# prefill / decode A/B; the server's top-p / min-p decode (base and final), the default settings
# (final); pfprof 4K. The sweeps are s12e.sh.
. .carry/common.sh; synth_bg; safe_start 560; ab_old
pf_checks
pf_cli
demo_fid
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
wait $SP; el synth
cmp_old_logits
ab_bench 100 --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,2K,4K,32K --decode 4K
srv_tok
for bin in /tmp/lily_old $B/lily; do
  lb=$([ $bin = $B/lily ] && echo new || echo old)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 SRV_SET=topp timeout 150 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done
$B/lily serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_new2.txt 2>&1 & SV=$!
LABEL=new SVPID=$SV SRV_DECODE=1 timeout 150 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
el servers
timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof"; grep -v upload $L/pfprof.txt | head -28
safe_end
