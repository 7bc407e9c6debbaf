#!/usr/bin/env bash
# The weights' block order on the GPU machine, one call (under the run tool's 600 s): blocks strip by strip (the
# default) against blocks input by input (RWKV_WEIGHT_BLOCKS=by-input, engine/rwkv7/weight-blocks.ts), which the
# twelfth session's probe ran faster for the 2×2 tiles of batch-64 products (bench/RESULTS.md, block order).
#   golden check with by-input first (every tiling and the GPU draws), then the engine section on 1.5B and 0.1B in
#   alternating processes (default / by-input / default / by-input: figures move ±10% between processes).
# Here first: npx tsc -p . && bash bench/device/prepare.sh (and models/default.st out of the tree: README.md above).
# Run: carry [".carry/device", "dist", ".carry/shared"], command "bash bench/device/block-order.sh 2>&1 | tail -60".
set -o pipefail
R="bash bench/device/remote.sh"
C="bash bench/device/clocks.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L | head -1
RWKV_WEIGHT_BLOCKS=by-input RWKV_SHARED=.carry/shared timeout 120 $R node dist/bench/golden-check.js v7-tiny > $OUT/golden-by-input.log 2>&1; echo "golden (by input) rc $?"
grep -v 'artificially' $OUT/golden-by-input.log | grep -E '"v7-tiny.(f16|f16-sgtile|f16-sgtile-base|f16-staged).seq|draws|kernel path' | head -8
for run in 1 2; do
  for order in on by-input; do
    CLOCKS=$OUT/engine-$order-$run-clocks.csv RWKV_WEIGHT_BLOCKS=$order timeout 200 $C $R node dist/bench/run.js --sections engine --seconds 1 --shapes 1.5B,0.1B --out $OUT/engine-$order-$run.json > $OUT/engine-$order-$run.log 2>&1
    echo "== blocks $order, run $run: rc $?"
    grep -h 'tok/s\|clocks.sh' $OUT/engine-$order-$run.log | grep -v artificially
  done
done
