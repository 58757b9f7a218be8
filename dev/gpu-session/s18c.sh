#!/usr/bin/env bash
# s18c.sh (device, ~1 min; eighteenth session, call 3): qgemm_sm's variants (token tiles a pass,
# stages of codes in flight, blocks an SM) at T = 256 and 512, against the engine's qgemm_launch.
. .carry/common.sh; safe_start 200
xz -dc $C/qgemm_sm.xz > /tmp/qgemm_sm && chmod +x /tmp/qgemm_sm
for T in 256 512; do timeout 60 /tmp/qgemm_sm $T 20 > $L/qgsm_$T.txt 2>&1; el "qgemm_sm $T rc=$?"; cat $L/qgsm_$T.txt; done
safe_end
