#!/usr/bin/env bash
# s11a.sh (device, ~8 min; eleventh session's first call): main + the GEMM raster switch
# (LILY_CUDA_QG_RASTER) and the two waiting branches, each carried as its own build:
# .carry/g.tar.xz (gdn-split-acc: lily, lily-gpu-test), .carry/p.tar.xz (srv-pipe).
# 1. main's prefill kernel tests (the rastered launches must give the same bits), the GDN tests of
#    both builds with their timing tables; 2. srv-pipe's e2e; 3. full size: raster 0/1 logits cmp,
#    raster A/B, gdn-split-acc A/B, pfprof 4K with raster 0 and 1; 4. the server's decode, main vs srv-pipe.
. .carry/common.sh; synth_bg; safe_start 560
mkdir -p /tmp/g /tmp/p; tar xJf $C/g.tar.xz -C /tmp/g; tar xJf $C/p.tar.xz -C /tmp/p
timeout 150 $B/lily-gpu-test prefill $(date +%s) > $L/prefill.txt 2>&1; el "prefill rc=$?"; grep -E "FAIL|passed" $L/prefill.txt | cut -c1-220 | head
grep -c "rastered bitwise equal" $L/prefill.txt; grep -c "GEMM blocks rastered: equal" $L/prefill.txt
LILY_GPU_PF=gdn timeout 60 /tmp/g/lily-gpu-test prefill $(date +%s) > $L/gdn_g.txt 2>&1; el "gsplit gdn tests rc=$?"; grep -E "FAIL|passed" $L/gdn_g.txt | cut -c1-200
LILY_GPU_PF=gdn timeout 60 $B/lily-gpu-test prefill $(date +%s) > $L/gdn_m.txt 2>&1; el "main gdn tests rc=$?"; grep -E "FAIL|passed" $L/gdn_m.txt | cut -c1-200
echo "== main"; grep -E "^\| (scan|chunked)" $L/gdn_m.txt | head -20
echo "== gsplit"; grep -E "^\| (scan|chunked)" $L/gdn_g.txt | head -20
timeout 60 /tmp/g/lily-gpu-test e2e $(date +%s) > $L/e2e_g.txt 2>&1; el "gsplit e2e rc=$?"; grep -E "FAIL|passed" $L/e2e_g.txt | cut -c1-200
timeout 60 /tmp/p/lily-gpu-test e2e $(date +%s) > $L/e2e_p.txt 2>&1; el "pipe e2e rc=$?"; grep -E "FAIL|passed|two halves" $L/e2e_p.txt | cut -c1-220
wait $SP; el synth
ids=$(python3 -c "print(','.join(str((i*7919)%240000+5) for i in range(300)))")
for v in 0 1; do LILY_CUDA_QG_RASTER=$v timeout 60 $B/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_r$v.f32 > $L/lg$v.txt 2>&1; done; el logits
cmp /tmp/lg_r0.f32 /tmp/lg_r1.f32 && echo "full-size prefill logits (300 tokens): raster 1 bitwise equal to raster 0"
timeout 60 /tmp/g/lily logits --model /tmp/big --backend cuda --ids $ids --out /tmp/lg_g.f32 > $L/lgg.txt 2>&1
python3 -c "
import numpy as np; a=np.fromfile('/tmp/lg_r0.f32',np.float32); b=np.fromfile('/tmp/lg_g.f32',np.float32)
print('gsplit vs main full-size logits: rel_l2 %.2e, max abs %.2e' % (np.linalg.norm(a-b)/np.linalg.norm(a), abs(a-b).max()))"
for v in 0 1 0 1; do LILY_CUDA_QG_RASTER=$v timeout 100 $B/lily bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 512,4K,32K --decode none --out $L/r$v 2>&1 | grep -E "^prefill " | sed "s/^/raster=$v /"; done; el "raster A/B"
for v in 0 1; do LILY_CUDA_QG_RASTER=$v timeout 60 $B/lily-gpu-test pfprof /tmp/big 4K > $L/pfprof$v.txt 2>&1; echo "== pfprof raster $v"; grep -E "\|" $L/pfprof$v.txt | head -16; done; el pfprof
for b in $B/lily /tmp/g/lily $B/lily /tmp/g/lily; do timeout 100 $b bench --model /tmp/big --backend cuda --no-plot --reps 1 --warmup 1 --prefill 4K,32K --decode none --out $L/gb 2>&1 | grep -E "^prefill " | sed "s|^|$b |"; done; el "gsplit A/B"
srv_tok
for bin in $B/lily /tmp/p/lily $B/lily /tmp/p/lily; do
  lb=$([ $bin = $B/lily ] && echo main || echo pipe)
  $bin serve --model /tmp/big --backend cuda --port 8099 --ctx 8192 > $L/serve_$lb.txt 2>&1 & SV=$!
  LABEL=$lb SVPID=$SV SRV_DECODE=1 timeout 100 python3 .carry/srv_client.py; kill $SV 2>/dev/null; wait $SV 2>/dev/null
done; el servers
safe_end
