#!/usr/bin/env bash
# sass.sh: SASS of the CUDA objects on a machine without a GPU, to prove a device-code change neutral
# (or see what it changed) before spending device time on it. cuobjdump and nvdisasm are not part of
# the Debian nvcc install; their wheels on PyPI carry the binaries.
#
#   dev/tools/sass.sh fetch                      the tools into $LILY_SASS_DIR (default ~/.cache/lily-sass)
#   dev/tools/sass.sh res OBJ.o [PATTERN]        registers / stack / shared memory per kernel
#   dev/tools/sass.sh cmp OLD.o NEW.o [PATTERN [RE=>REPL]]  per kernel: identical, or the instruction counts
#                                                and resources that differ (dev/tools/sass_cmp.py; RE=>REPL
#                                                renames NEW's kernels, e.g. a template parameter added)
#   dev/tools/sass.sh lines OBJ.o PATTERN [N]    instructions per source line of one kernel (sass_lines.py)
#
# A typical check: cp build/src/cuda/gemv.o /tmp/gemv_old.o; edit; make -j2;
# dev/tools/sass.sh cmp /tmp/gemv_old.o build/src/cuda/gemv.o
set -euo pipefail
D=${LILY_SASS_DIR:-$HOME/.cache/lily-sass}
BIN=$D/nvidia/cu13/bin
here=$(cd "$(dirname "$0")" && pwd)

fetch() {
    [ -x "$BIN/cuobjdump" ] && [ -x "$BIN/nvdisasm" ] && return 0
    mkdir -p "$D/whl"
    local py=python3
    if ! $py -m pip --version >/dev/null 2>&1; then
        [ -x "$D/venv/bin/python" ] || python3 -m venv "$D/venv"
        py=$D/venv/bin/python
    fi
    $py -m pip download -q --no-deps -d "$D/whl" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    for w in "$D"/whl/*.whl; do (cd "$D" && python3 -m zipfile -e "$w" .); done
    chmod +x "$BIN"/cuobjdump "$BIN"/nvdisasm
}

case "${1:-}" in
fetch) fetch ;;
res)
    fetch
    "$BIN/cuobjdump" -res-usage "$2" | awk -v p="${3:-}" '/Function/ {f = $2; next} f && index(f, p) {print f; print "   " $0} {f = ""}'
    ;;
cmp)
    fetch
    python3 "$here/sass_cmp.py" "$BIN/cuobjdump" "$2" "$3" "${4:-}" ${5:+"$5"}
    ;;
lines)
    fetch
    t=$(mktemp -d)
    (cd "$t" && "$BIN/cuobjdump" -xelf all "$OLDPWD/$2" >/dev/null)
    "$BIN/nvdisasm" --print-line-info "$t"/*.cubin >"$t/x.sass"
    python3 "$here/sass_lines.py" "$t/x.sass" "$3" "${4:-30}"
    rm -rf "$t"
    ;;
*)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
