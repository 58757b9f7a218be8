# common.sh: the prelude the device scripts share, sourced from the repository root on the GPU
# machine (`. .carry/common.sh`; prep.sh copies it there): library path, the carried build unpacked
# into $B, logs under $L, `el` (elapsed seconds + a label) and `synth_bg` (the full-size synthetic
# checkpoint in /tmp/big, written in the background unless there; its pid in SP).
R=$(pwd); C=$R/.carry; export LD_LIBRARY_PATH=$C/lib LILY_LOG=0
B=/tmp/b; L=/tmp/logs
mkdir -p $B $L; [ -x $B/lily ] || tar xJf $C/bin.tar.xz -C $B
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
synth_bg() { ( [ -f /tmp/big/config.json ] || $B/lily synth --preset qwen3.6-35b-a3b --out /tmp/big --seed 1 > $L/synth.txt 2>&1 ) & SP=$!; }
