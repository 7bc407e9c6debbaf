#!/usr/bin/env bash
# Engine knobs A/B on the GPU machine, one call (under the run tool's 600 s): the engine section in alternating
# processes, one per setting and round, because figures move ±10% between processes of one machine session
# (bench/RESULTS.md) and only an alternation within one call compares. A golden check first runs with every
# non-default setting at once (kernels a setting adds are checked before they are timed).
#   bash bench/device/knobs.sh 'RWKV_WEIGHT_BLOCKS=by-input' 'RWKV_MATMUL_TILED_SUBGROUPS=4096' ...
# Each argument is one setting: space-separated VAR=VALUE pairs, or 'default'; 'default' always runs first.
# SHAPES (default 1.5B), ROUNDS (default 2), KNOB_SECONDS (default 1; not SECONDS, which bash keeps as its own clock:
# the sixteenth session's calls read that, 0, and timed each case's minimum steps only).
# Here first: npx tsc -p . && bash bench/device/prepare.sh (and models/default.st out of the tree: README.md above).
# Run: carry [".carry/device", "dist", ".carry/shared"], command "bash bench/device/knobs.sh ... 2>&1 | tail -60".
set -o pipefail
# R and C may be set empty to try the script on this machine (lavapipe, SHAPES=smoke, GOLDEN=0).
R=${R-bash bench/device/remote.sh}
C=${C-bash bench/device/clocks.sh}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# The run tool brings back at most 8 files: logs go to $W, packed into $OUT/knobs.tgz after every process, so a call
# cut short still returns what it finished.
W=/tmp/knobs-work; rm -rf "$W"; mkdir -p "$W"
pack() { tar czf "$OUT/knobs.tgz" -C "$W" .; }
SHAPES=${SHAPES:-1.5B}; ROUNDS=${ROUNDS:-2}; SECONDS_EACH=${KNOB_SECONDS:-1}
nvidia-smi -L | head -1
settings=(default)
for a in "$@"; do [[ $a != default ]] && settings+=("$a"); done
all=$(printf '%s ' "${settings[@]:1}")
if [[ ${GOLDEN:-1} == 1 ]]; then
  env $all RWKV_SHARED=.carry/shared timeout 120 $R node dist/bench/golden-check.js v7-tiny > $W/golden-knobs.log 2>&1; echo "golden ($all) rc $?"; pack
  grep -v 'artificially' $W/golden-knobs.log | grep -E '"v7-tiny.(f16|f16-sgtile|f16-tiled|f16-by-input-sgtile).seq|draws|kernel path' | head -6
fi
for run in $(seq 1 "$ROUNDS"); do
  for i in "${!settings[@]}"; do
    s=${settings[$i]}
    vars=$([[ $s != default ]] && echo "$s")
    CLOCKS=$W/knob$i-$run-clocks.csv env $vars timeout 200 $C $R node dist/bench/run.js --sections engine --seconds "$SECONDS_EACH" --shapes "$SHAPES" --out $W/knob$i-$run.json > $W/knob$i-$run.log 2>&1
    echo "== [$i] $s, round $run: rc $?"; pack
    # The figures without the kernel path's long description.
    grep -h 'tok/s\|clocks.sh' $W/knob$i-$run.log | grep -v artificially | sed 's/; kernels: .*//'
  done
done
