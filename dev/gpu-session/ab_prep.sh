#!/usr/bin/env bash
# ab_prep.sh PATCH [PATCH...] (this machine, from the repository root): fill .carry for a device A/B of patches (applied in turn) against
# HEAD. HEAD's build goes in as lily_old.xz / gt_old.xz (common.sh's ab_old, ncu_ab), the patched build as
# bin.tar.xz (prep.sh), trimmed to what an A/B needs. The patch is reverted on exit, so the working tree is
# left as it was; build/ holds the patched binaries until the next make rebuilds the reverted files.
# Then: the device tool with carry [".carry"] and `bash .carry/s35a.sh` (or another A/B script).
set -euo pipefail
for p in "$@"; do [ -f "$p" ] || { echo "ab_prep.sh: no patch file '$p'" >&2; exit 1; }; done
git diff --quiet -- src tests dev || { echo "ab_prep.sh: uncommitted changes under src/, tests/ or dev/" >&2; exit 1; }
make -j2 > /dev/null
xz -T2 -c build/lily > /tmp/ab_lily_old.xz
xz -T2 -c build/lily-gpu-test > /tmp/ab_gt_old.xz
git apply --check "$1"
applied=()
revert() { local i; for (( i=${#applied[@]}-1; i>=0; i-- )); do git apply -R "${applied[$i]}"; done; }
trap revert EXIT
for p in "$@"; do git apply "$p"; applied+=("$p"); done
make -j2 > /dev/null
bash dev/gpu-session/prep.sh > /dev/null
rm -rf .carry/fuzz.tar.xz .carry/persist* .carry/qgemm_sm* .carry/tok .carry/bin-trace.tar.xz
mv /tmp/ab_lily_old.xz .carry/lily_old.xz
mv /tmp/ab_gt_old.xz .carry/gt_old.xz
du -sh .carry
