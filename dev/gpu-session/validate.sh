#!/usr/bin/env bash
# validate.sh (device): the GPU suite (suite.sh) plus the switches that are off by default, on:
# e2e, fixtures and the CLI prefill checks with LILY_CUDA_FA=1 LILY_CUDA_GDN_CHUNKED=1
# LILY_CUDA_GEMV2=1, memcheck of the prefill kernel tests (small), the full-size model's logits
# with the new paths against the defaults (T >= 64, so the chunked GDN runs), then matched benches:
# decode 4K with and without GEMV2, prefill 1K/4K/16K with each prefill switch. Logs in $OUT.
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
mkdir -p /tmp/b /tmp/logs && tar xJf $C/bin.tar.xz -C /tmp/b
B=/tmp/b; L=/tmp/logs; NEW="LILY_CUDA_FA=1 LILY_CUDA_GDN_CHUNKED=1 LILY_CUDA_GEMV2=1"
if [ -n "${FUZZ_S:-}" ] && [ -f $C/fuzz.tar.xz ]; then
    mkdir -p /tmp/fz && tar xJf $C/fuzz.tar.xz -C /tmp/fz
    for t in $(ls /tmp/fz); do
        mkdir -p /tmp/corp/$t && cp -r tests/fuzz/corpus/$t/. /tmp/corp/$t/
        ( TIMEFORMAT="$t cpu_user=%U cpu_sys=%S wall=%R"
          { time nice -n 10 /tmp/fz/$t -max_total_time=$FUZZ_S -print_final_stats=1 \
                -artifact_prefix=$L/$t- $(cat tests/fuzz/$t.options 2>/dev/null) /tmp/corp/$t \
                > $L/$t.log 2>&1; } 2>> $L/$t.log ) &
    done
fi
( sleep ${SAFE_S:-565}; tar czf $OUT/logs.tgz -C /tmp logs ) &  # the logs come back even if the call runs out
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
el start; ( /tmp/b/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) &
SP=$!
LILY_GPU_TEST=$B/lily-gpu-test LILY_BIN=$B/lily timeout 300 bash tests/run_gpu.sh > $L/gpu.txt 2>&1
el "run_gpu rc=$?"; grep -E "^(PASS|FAIL)|passed" $L/gpu.txt | tr '\n' ' '; echo
grep -E "FAIL|fail" $L/gpu.txt | grep -v "^FAIL\|0 failed" | cut -c1-200 | head -20
timeout 100 $B/lily-gpu-test prefill 7 > $L/prefill.txt 2>&1; el "prefill rc=$?"
grep -E "FAIL|passed" $L/prefill.txt | cut -c1-200 | tail -12
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/lily-gpu-test prefill 8 small > $L/memcheck_prefill.txt 2>&1
el "memcheck prefill small rc=$?"; tail -2 $L/memcheck_prefill.txt
env $NEW timeout 60 $B/lily-gpu-test e2e 9 > $L/e2e_new.txt 2>&1; el "e2e new rc=$?"; grep -E "FAIL|passed" $L/e2e_new.txt | cut -c1-200
env $NEW LILY_GPU_TEST=1 LILY_BIN=$B/lily timeout 60 python3 tests/gpu/cli_prefill.py > $L/cli_new.txt 2>&1; el "cli_prefill new rc=$?"; tail -3 $L/cli_new.txt
wait $SP; el synth; tail -1 $L/synth.txt
python3 - > $L/big_logits.txt 2>&1 <<'PY'
import numpy as np, subprocess, os
ids = ",".join(str(i) for i in np.random.default_rng(5).integers(0, 240000, 300))
def run(env):
    e = dict(os.environ, **env); subprocess.run(["/tmp/b/lily","logits","--model","/tmp/big","--backend","cuda","--ids",ids,"--out","/tmp/l.f32"],env=e,check=True)
    return np.fromfile("/tmp/l.f32",dtype="<f4").reshape(300,-1)
ref = run({}); 
for name, env in [("fa", {"LILY_CUDA_FA":"1"}), ("gdn_chunked", {"LILY_CUDA_GDN_CHUNKED":"1"}), ("gemv2", {"LILY_CUDA_GEMV2":"1"}), ("tokenwise", {"LILY_CUDA_PREFILL":"0"})]:
    a = run(env); rel = np.linalg.norm(a-ref,axis=1)/np.linalg.norm(ref,axis=1)
    print(f"{name}: rel.L2 vs default mean {rel.mean():.3e} max {rel.max():.3e} top1 {np.mean(a.argmax(1)==ref.argmax(1))*100:.1f}%")
PY
el "big logits"; cat $L/big_logits.txt | tail -5
BB="$B/lily bench --model /tmp/big --backend cuda --no-plot --no-ceilings"
for v in "" "LILY_CUDA_GEMV2=1"; do env $v timeout 60 $BB --prefill none --decode 4K,32K --reps 3 --out $L/dec_${v:-base} 2>&1 | grep -E "^(prefill|decode) " ; el "decode $v"; done
for v in "" "LILY_CUDA_FA=1" "LILY_CUDA_GDN_CHUNKED=1" "$NEW"; do env $v timeout 80 $BB --prefill 1K,4K,16K --decode none --reps 2 --out $L/pf_$(echo ${v:-base} | tr ' =' '__') 2>&1 | grep -E "^(prefill|decode) " ; el "prefill $v"; done
wait; for f in $L/fuzz_*.log; do [ -f "$f" ] && grep -E "cpu_user|stat::number_of_executed_units" "$f" | tr '\n' ' ' && echo; done
tar czf $OUT/logs.tgz -C /tmp logs $( [ -d /tmp/corp ] && echo corp )
