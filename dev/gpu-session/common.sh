# common.sh: the prelude the device scripts share, sourced from the repository root on the GPU
# machine (`. .carry/common.sh`; prep.sh copies it there): library path, the carried build unpacked
# into $B, logs under $L, `el` (elapsed seconds + a label) and `synth_bg` (the full-size synthetic
# checkpoint in /tmp/big, written in the background unless there; its pid in SP).
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
B=/tmp/b; L=/tmp/logs
mkdir -p $B $L; [ -x $B/lily ] || tar xJf $C/bin.tar.xz -C $B
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
synth_bg() { ( [ -f /tmp/big/config.json ] || $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) & SP=$!; }
# safe_start [S]: the logs come back even if the call runs past its limit (a tarball after S
# seconds). Its output goes to /dev/null and safe_end kills the sleep itself: a sleeping child that
# held the call's stdout kept a piped call (`bash x.sh | tail`) open to the end of the sleep, and
# 2026-11-30's first call spent 400 s of device time waiting for it.
safe_start() { ( sleep ${1:-560}; tar czf $OUT/logs.tgz -C /tmp logs ) >/dev/null 2>&1 & SAFE=$!; }
safe_end() { pkill -P $SAFE 2>/dev/null; kill $SAFE 2>/dev/null; tar czf $OUT/logs.tgz -C /tmp logs; }
# pf_checks: the prefill kernel tests (280 s in s22c.sh, hence the 400 s limit), e2e and the HF fixtures
# of the carried build, one summary line each (logs in $L/prefill.txt, e2e.txt, fixtures.txt).
pf_checks() {
    timeout 400 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
    e2e_fix
}
# e2e_fix: e2e and the HF fixtures of $B, one summary line each.
e2e_fix() {
    timeout 90 $B/lily-gpu-test e2e $(date +%s) > $L/e2e.txt 2>&1; el "e2e rc=$?"; grep -E "FAIL|passed" $L/e2e.txt | cut -c1-260
    local fix; fix=$(for d in tests/fixtures/models/*/; do [ -f "$d/ref_logits.f32" ] && echo "${d%/}"; done)
    timeout 150 $B/lily-gpu-test fixtures $fix > $L/fixtures.txt 2>&1; el "fixtures rc=$?"; grep -E "FAIL|passed" $L/fixtures.txt | cut -c1-220
}
# l1pf_checks: the L1 prefetch switch's checks on $B (gemv2-l1pf.patch): e2e, which decodes every
# LILY_CUDA_GV2_L1PF mode bitwise against the default, and the gemv kernel tests, which run each mode.
l1pf_checks() {
    timeout 120 $B/lily-gpu-test e2e 71 > $L/e2e.txt 2>&1; el "e2e (the patched build's defaults) rc=$?"; grep -E "^FAIL|passed" $L/e2e.txt | cut -c1-200
    grep -E "L1 prefetch" $L/e2e.txt | cut -c1-200
    LILY_GPU_KERNELS=gemv timeout 120 $B/lily-gpu-test kernels 73 > $L/kgemv.txt 2>&1; el "gemv kernel tests rc=$?"; grep -E "^FAIL|passed" $L/kgemv.txt | cut -c1-200; grep -c "L1 prefetch mode .: bitwise equal" $L/kgemv.txt
}
# gdn_checks: the GDN prefill tests of $B and their timing table (LILY_GPU_PF=gdn), then racecheck and
# memcheck of their small cases; returns non-zero when a test failed.
gdn_checks() {
    LILY_GPU_PF=gdn timeout 120 $B/lily-gpu-test prefill $(date +%s) > $L/gdn.txt 2>&1; local rc=$?; el "gdn prefill tests rc=$rc"
    grep -E "FAIL|passed" $L/gdn.txt | cut -c1-240 | head -20; grep -A12 "GDN prefill (Hv" $L/gdn.txt
    if grep -q FAIL $L/gdn.txt || [ $rc -ne 0 ]; then return 1; fi
    LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/rc.txt 2>&1; el "racecheck gdn rc=$?"; tail -1 $L/rc.txt
    LILY_GPU_PF=gdn timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 5 small > $L/mc.txt 2>&1; el "memcheck gdn rc=$?"; tail -1 $L/mc.txt
}
# gdn_tables NAME BIN NAME BIN: the GDN timing table's chunked rows of two lily-gpu-test builds, twice,
# alternating (each build's GDN tests with one seed run first; their summary line is printed).
gdn_tables() {
    local i; for i in 1 2; do
        LILY_GPU_PF=gdn timeout 120 $2 prefill 11 > $L/gdn_$1$i.txt 2>&1; el "$1 rc=$? $(grep -E 'passed' $L/gdn_$1$i.txt | tail -1)"
        grep -E "^\| chunked \| (1024|4096)" $L/gdn_$1$i.txt | sed "s/^/$1 /"
        LILY_GPU_PF=gdn timeout 120 $4 prefill 11 > $L/gdn_$3$i.txt 2>&1; el "$3 rc=$? $(grep -E 'passed' $L/gdn_$3$i.txt | tail -1)"
        grep -E "^\| chunked \| (1024|4096)" $L/gdn_$3$i.txt | sed "s/^/$3 /"
    done
}
# A/B of two builds (cvt.sh, fast*.sh and the like): ab_old unpacks the previous build, carried as
# .carry/lily_old.xz, to /tmp/lily_old; ab_checks runs all kernel tests, e2e and the HF fixtures of
# $B (one summary line each); ab_bench SECONDS ARGS... runs `lily bench ARGS` twice with each build,
# alternating (old first), its prefill/decode lines prefixed "old" / "new".
ab_old() { xz -dc $C/lily_old.xz > /tmp/lily_old && chmod +x /tmp/lily_old; }
ab_checks() {
    timeout 150 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"; grep -E "FAIL|passed|bf16 rounding" $L/kernels.txt | cut -c1-200
    e2e_fix
}
ab_bench() { # AB_N: rounds (default 2)
    local t=$1 i; shift
    for i in $(seq ${AB_N:-2}); do
        timeout $t /tmp/lily_old bench "$@" --out $L/old$i 2>&1 | grep -E "^(decode|prefill) " | sed "s/^/old /"
        timeout $t $B/lily bench "$@" --out $L/new$i 2>&1 | grep -E "^(decode|prefill) " | sed "s/^/new /"
    done; el bench
}
# pf_cli: tests/gpu/cli_prefill.py on the carried lily (log $L/cli_prefill.txt, failures printed).
pf_cli() {
    LILY_BIN=$B/lily timeout 150 python3 tests/gpu/cli_prefill.py > $L/cli_prefill.txt 2>&1; el "cli_prefill rc=$?"
    grep -E "FAIL|failed" $L/cli_prefill.txt | cut -c1-220
}
# env_ab VAR ARGS...: `lily bench ARGS` with VAR=0, 1, 0, 1 (one binary, a switch A/B), its
# prefill/decode lines prefixed "VAR=v". AB_A / AB_B: the two values (default 0 / 1); AB_PAIRS: pairs (2).
env_ab() {
    local var=$1 v i; shift
    for i in $(seq ${AB_PAIRS:-2}); do
        for v in ${AB_A:-0} ${AB_B:-1}; do
            env $var=$v timeout 100 $B/lily bench "$@" --out $L/ab_$v 2>&1 | grep -E "^(decode|prefill) " | sed "s/^/$var=$v /"
        done
    done; el bench
}
# dec_ab VAR: env_ab of decode alone on /tmp/big (DEC_AB: the contexts, default 4K).
dec_ab() { env_ab $1 --model /tmp/big --backend cuda --no-plot --prefill none --decode ${DEC_AB:-4K} --reps 2 --warmup 1; }
# prof_ab VAR [PATTERN]: `lily-gpu-test prof /tmp/big` (the per-kernel table of one 4K step) with VAR=0 and 1,
# its rows matching PATTERN (default: all).
prof_ab() {
    local v; for v in 0 1; do
        env $1=$v timeout 80 $B/lily-gpu-test prof /tmp/big > $L/prof_$v.txt 2>&1; el "prof $1=$v rc=$?"; grep -E "${2:-^\|}" $L/prof_$v.txt
    done
}
# kernels_grep PATTERN: the kernel tests of $B, their summary and the lines matching PATTERN.
kernels_grep() {
    timeout 200 $B/lily-gpu-test kernels $(date +%s) > $L/kernels.txt 2>&1; el "kernels rc=$?"
    grep -E "^FAIL|passed|$1" $L/kernels.txt | cut -c1-250
}
# pf_prof [N]: `lily-gpu-test pfprof /tmp/big 4K`, its first N table rows.
pf_prof() { timeout 120 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof.txt 2>&1; el "pfprof rc=$?"; grep -E "\|" $L/pfprof.txt | head -${1:-30}; }
# The closing calls' shared checks: demo fidelity on CUDA (demo_fid); memcheck of the small prefill
# tests and racecheck of the MoE kernels (san_checks); the full-size prefill logits of a 300-token
# prompt from /tmp/lily_old and $B, compared bitwise, else by cmp_logits.py (cmp_old_logits; after synth and ab_old); the
# tokenizer files beside /tmp/big for `lily serve` (srv_tok).
demo_fid() { # [BIN [LABEL]]: another binary than $B/lily (e.g. /tmp/lily_old), its log $L/demo_LABEL.txt
    local bin=${1:-$B/lily} lb=${2:-}
    LILY_BIN=$bin LILY_TEST_BACKEND=cuda timeout 120 python3 -m pytest -q tests/py/test_demo_fidelity.py > $L/demo$lb.txt 2>&1; el "demo fidelity (cuda) $lb rc=$?"; tail -1 $L/demo$lb.txt
}
san_checks() {
    timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 7 small > $L/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -1 $L/memcheck.txt
    LILY_GPU_KERNELS=moe timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/lily-gpu-test kernels 31 > $L/racecheck.txt 2>&1; el "racecheck moe rc=$?"; grep -E "FAIL|passed|SUMMARY" $L/racecheck.txt | head -3
}
cmp_old_logits() {
    local ids; ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
    timeout 60 /tmp/lily_old logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_old.f32 > $L/lgo.txt 2>&1; el "old logits rc=$?"
    timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_new.f32 > $L/lgn.txt 2>&1; el "new logits rc=$?"
    if cmp -s /tmp/lg_old.f32 /tmp/lg_new.f32; then echo "full-size prefill logits (300 tokens): bitwise equal to the session's base"
    else python3 $C/cmp_logits.py /tmp/lg_old.f32 /tmp/lg_new.f32 248320; fi # not bitwise: how far (rel. L2, argmax)
}
srv_tok() { xz -dc $C/tok/tokenizer.json.xz > /tmp/big/tokenizer.json && cp $C/tok/tokenizer_config.json /tmp/big/; }
# stall_prof KERNEL [VAR=v ...]: Nsight Compute of one launch of KERNEL (a regex) in the MoE block at 4096
# tokens (LILY_GPU_PF=moe, the third launch), with the environment given: warp states, scheduler, stall
# samples by SASS line; the details page in $L/KERNEL_details.txt, the source page summarised by stall.py.
stall_prof() {
    local k=$1; shift
    env "$@" LILY_GPU_PF=moe timeout 150 ncu --clock-control none --section WarpStateStats --section SchedulerStats --section SourceCounters \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
        -k regex:$k --launch-skip 2 --launch-count 1 -o $L/$k $B/lily-gpu-test prefill 5 > $L/ncu_$k.txt 2>&1; el "ncu $k rc=$?"
    ncu -i $L/$k.ncu-rep --page details > $L/${k}_details.txt 2>&1
    ncu -i $L/$k.ncu-rep --page source --csv --print-source sass > $L/${k}_sass.csv 2>&1; el "source rc=$?"
    grep -E "Duration|Issue Slots Busy|No Eligible|Eligible Warps|Registers Per|Achieved Occupancy" $L/${k}_details.txt | head -8
    python3 $C/stall.py $L/${k}_sass.csv 20
    rm -f $L/$k.ncu-rep
}
# logits_ab: the full-size checkpoint's 24 decode steps (`lily logits --step 1` on /tmp/big) by lily_old (ab_old)
# and by $B/lily, compared with cmp: a change meant to keep the bits must print the "bitwise" line.
logits_ab() {
    decode_logits old /tmp/lily_old
    decode_logits new $B/lily
    cmp /tmp/l_old.f32 /tmp/l_new.f32 && echo "full-size decode logits (24 steps): new == old, bitwise"
}
# decode_logits NAME BIN [VAR=v ...]: those 24 decode steps by BIN with the environment given, into /tmp/l_NAME.f32.
decode_logits() {
    local v=$1 bin=$2 ids; shift 2; ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(24)))")
    env "$@" timeout 90 $bin logits --model /tmp/big --backend cuda --ids $ids --step 1 --out /tmp/l_$v.f32 > $L/l_$v.txt 2>&1; el "logits $v rc=$?"
}
# san_bg TOOL LOG MODE SEED [VAR=v ...]: compute-sanitizer TOOL of `$B/lily-gpu-test MODE SEED` in the background
# (SAN_LIMIT seconds, default 500), its output and exit status (124: cut) in LOG; san_wait waits for those runs
# alone (a bare `wait` also waits for safe_start's timer: the thirty-fifth session's calls 2 and 4 idled to their
# safe_start limit that way). san_report LOG LABEL: one line of PASS/FAIL counts, the suite's and the sanitizer's
# summaries and the status, then the first failures or hazards.
SAN_PIDS=()
san_bg() {
    local t=$1 log=$2 mode=$3 seed=$4; shift 4
    ( env "$@" timeout ${SAN_LIMIT:-500} compute-sanitizer --tool $t --error-exitcode 9 $B/lily-gpu-test $mode $seed > $log 2>&1
      echo "rc=$?" >> $log ) &
    SAN_PIDS+=($!)
}
san_wait() { wait "${SAN_PIDS[@]}"; SAN_PIDS=(); el sanitizers; }
san_report() {
    local f=$1
    echo "== $2: $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL; $(grep -E 'passed, ' $f | tail -1); $(grep -E 'SUMMARY' $f | tail -1); $(tail -1 $f)"
    grep -E "^FAIL|hazard|Error" $f | grep -v SUMMARY | head -5 | cut -c1-200
}
# ncu_dur LABEL REGEX BIN [VAR=v ...]: the duration of every launch of the kernels matching REGEX in `BIN prof
# /tmp/big` (Nsight Compute, caches not flushed), with the environment given; one line: LABEL, launches, median,
# mean, min (ns).
ncu_dur() {
    local lb=$1 re=$2 bin=$3; shift 3
    env "$@" timeout 100 ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum -k regex:"$re" \
        --csv --print-units base $bin prof /tmp/big > $L/ncu.csv 2> $L/ncu.err; el "ncu $lb rc=$?"
    python3 -c "
import csv,statistics as s
r=[x for x in csv.reader(l for l in open('$L/ncu.csv') if l.startswith('\"'))]
h=r[0]; v=[float(x[h.index('Metric Value')].replace(',','')) for x in r[1:]]
print('$lb $re ns: n=%d median %.0f mean %.0f min %.0f' % (len(v), s.median(v), s.mean(v), min(v)))
if 'Grid Size' in h:  # by grid size too: a change to some launch shapes only (e.g. GV_RESID's 128 blocks)
    g={}
    for x, t in zip(r[1:], v): g.setdefault(x[h.index('Grid Size')], []).append(t)
    if len(g) > 1: print('   by grid: ' + '; '.join('%s n=%d median %.0f' % (k, len(w), s.median(w)) for k, w in sorted(g.items(), key=lambda kw: -len(kw[1]))))"
}
# ncu_ab REGEX: ncu_dur by the carried lily-gpu-test of the build before ($C/gt_old.xz), then by $B's.
ncu_ab() {
    xz -dc $C/gt_old.xz > /tmp/gt_old && chmod +x /tmp/gt_old
    ncu_dur old "$1" /tmp/gt_old
    ncu_dur new "$1" $B/lily-gpu-test
}
# ncu_envs REGEX ENV...: ncu_dur by $B's build once per environment given ("-" for none, else VAR=v[,VAR=v]).
ncu_envs() {
    local re=$1 e ev; shift
    for e in "$@"; do
        ev=(); [ "$e" != - ] && IFS=, read -ra ev <<< "$e"
        ncu_dur "$e" "$re" $B/lily-gpu-test "${ev[@]}"
    done
}
