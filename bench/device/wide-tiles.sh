#!/usr/bin/env bash
# Workgroup tiles past 64 × 64 on the GPU machine, one call (under the run tool's 600 s), in the GEMM probe only:
# the engine's products all run 64 × 64 workgroup tiles or smaller (TILE_TOKENS, SEGMENT_ALIGN), so each reads both
# operands from L2 once per 64 outputs or tokens, 1/32 byte a FLOP: the 1.5B FFN key at 512 tokens (126 µs a layer)
# is then about 4.3 TB/s of L2 reads, and every loaded kernel the probe timed stopped at 135–190 TFLOP/s against
# 356–485 for the multiplies alone (bench/RESULTS.md "Flat tiles"). 128 × 128 tiles halve those reads if the
# subgroups of a workgroup share their blocks in L1. The best 64 × 64 kernels are timed beside them; every variant is
# checked against float64 first. The engine runs them too (RWKV_MATMUL_TILED up to 128 × 128, matmul.ts WIDE_TILE):
# with the argument 'engine' this script compares its prefill in the engine instead (a second call): default tiles
# against 4×4 tiles in 2×2 subgroups from 256 rows, alternating processes, after a golden check on the wide tiles.
# Here first: npx tsc -p . && bash bench/device/prepare.sh (and models/default.st out of the tree: README.md above).
# Run: carry [".carry/device", "dist", ".carry/shared"], command "bash bench/device/wide-tiles.sh 2>&1 | tail -80",
# then (if a wide tile won) "bash bench/device/wide-tiles.sh engine 2>&1 | tail -40".
set -o pipefail
R="bash bench/device/remote.sh"
C="bash bench/device/clocks.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L | head -1
if [[ ${1:-} == engine ]]; then
  WIDE_SPEC=${WIDE_SPEC:-4x4x2x2u4@256}
  # From 1 row, so the golden sequences (24 tokens) run on the wide tiles in the 'f16-tiled' mode.
  RWKV_MATMUL_TILED=${WIDE_SPEC%@*}@1 RWKV_SHARED=.carry/shared timeout 120 $R node dist/bench/golden-check.js v7-tiny > $OUT/golden-wide.log 2>&1; echo "golden (${WIDE_SPEC%@*}@1) rc $?"
  grep -v 'artificially' $OUT/golden-wide.log | grep -E '"v7-tiny.(f16|f16-tiled).seq|kernel path' | head -4
  for run in 1 2; do
    for spec in default $WIDE_SPEC; do
      env $([[ $spec != default ]] && echo RWKV_MATMUL_TILED=$spec) timeout 200 $R node dist/bench/run.js --sections engine --seconds 1 --shapes 1.5B,0.1B --out $OUT/engine-$spec-$run.json > $OUT/engine-$spec-$run.log 2>&1
      echo "== tiles $spec, run $run: rc $?"; grep -h 'prefill' $OUT/engine-$spec-$run.log | grep -v artificially
    done
  done
  exit 0
fi
WIDE='4x4x2x2|4x4x1x2|4x4x2x1|2x4x2x2|4x2x2x2'
BEST='4x4x1x1|4x2x1x2|2x2x2x2'
CLOCKS=$OUT/wide-512-clocks.csv timeout 300 $C $R node dist/bench/device/gemm-probe.js --only "^dirF($WIDE|$BEST)-u4(-s[24])?$" \
  --shapes 2048x2048xT512,8192x2048xT512,2048x8192xT512 --hold 200 --rounds 3 > $OUT/wide-512.log 2>&1; echo "512 tokens rc $?"
grep '"variant"' $OUT/wide-512.log | sed 's/"weightGBs.*//' | sort -t'"' -k4,4 -k8,8
CLOCKS=$OUT/wide-64-clocks.csv timeout 240 $C $R node dist/bench/device/gemm-probe.js --only "^dirF($WIDE|$BEST)-u(1|4)-s(2|4|8)(-kmaj)?$" \
  --shapes 8192x2048xT64,2048x8192xT64 --hold 200 --rounds 3 --cold 8 > $OUT/wide-64.log 2>&1; echo "64 tokens rc $?"
grep '"variant"' $OUT/wide-64.log | sed 's/"weightGBs.*//' | sort -t'"' -k4,4 -k8,8
grep -h 'clocks.sh' $OUT/wide-*.log
