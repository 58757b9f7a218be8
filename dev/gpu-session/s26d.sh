#!/usr/bin/env bash
# s26d.sh (device, ~9 min): the session's closing check of main's build (the code of 187c50c): the whole GPU
# suite (tests/run_gpu.sh: kernels, prefill, e2e, HF fixtures, CLI fixtures, CLI prefill, memcheck, racecheck),
# then the full-size logits of a 300-token prompt with LILY_CUDA_GDN_INPROJ 0 and 1 (bitwise, else how far).
. .carry/common.sh; safe_start 585
synth_bg
LILY_GPU_TEST=$B/lily-gpu-test LILY_BIN=$B/lily timeout 470 bash tests/run_gpu.sh > $L/gpu.txt 2>&1
el "run_gpu rc=$?"; grep -E "^(PASS|FAIL) [a-z0-9-]+( \[[0-9]+ s\])?$|^[0-9]+ passed|ERROR SUMMARY|RACECHECK SUMMARY" $L/gpu.txt | cut -c1-200 | tail -30
grep -E "^[0-9]+ passed, [0-9]+ failed" $L/gpu.txt | head -8
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 0 1; do LILY_CUDA_GDN_INPROJ=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg$v.f32 > $L/lg$v.txt 2>&1; el "logits inproj=$v rc=$?"; done
if cmp -s /tmp/lg0.f32 /tmp/lg1.f32; then echo "full-size logits (300 tokens): inproj 0 and 1 bitwise equal"; else python3 $C/cmp_logits.py /tmp/lg0.f32 /tmp/lg1.f32 248320; fi
safe_end
