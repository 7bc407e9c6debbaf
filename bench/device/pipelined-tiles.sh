#!/usr/bin/env bash
# Software-pipelined trips in the GEMM probe, one call (under the run tool's 600 s): every loaded kernel the probe
# timed stopped at 135–190 TFLOP/s against 356–485 for the multiplies alone (bench/RESULTS.md "Flat tiles"), and
# neither wider tiles nor staging in workgroup memory moved that. A trip's loads all come before its multiplies, but
# nothing overlaps one trip's loads with the previous trip's multiplies: the 'pipe' variants load the next trip into
# fresh registers first. Timed beside the engine's current tiles and the multiplies-alone ceiling, at 512 tokens
# (prefill) on the 1.5B shapes, then at 64 tokens (batched decode, weights streamed: --cold 8). The engine's kernel
# runs beside them pipelined and with K slices a workgroup (engine/rwkv7/tiled-slices.ts).
# Here first: npx tsc -p . && bash bench/device/prepare.sh (and models/default.st out of the tree: README.md).
# Run: carry [".carry/device", "dist"], command "bash bench/device/pipelined-tiles.sh 2>&1 | tail -80" (argument 512:
# the 512-token part only). The engine runs pipelined trips with RWKV_MATMUL_TILED_PIPE=on (engine/rwkv7/tiled-pipeline.ts):
# bench/device/knobs.sh 'RWKV_MATMUL_TILED_PIPE=on' compares it there.
set -o pipefail
R="bash bench/device/remote.sh"
C="bash bench/device/clocks.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L | head -1
BASE='dirF(4x4x1x1|4x2x1x2|2x2x2x2)-u4'
PIPE='dirF4x4x1x1(-u2)?-pipe|dirF4x2x1x2-u(2|4)-pipe|dirF2x2x2x2-u4-pipe'
# The engine's own kernel (split only, see gemm-probe.ts 'eng'): pipelined, and in 2 or 4 slices of K a workgroup.
ENG='engF(4x4x1x1|4x2x1x2)-u4(-pipe|-q2|-q4)?'
CLOCKS=$OUT/pipe-512-clocks.csv timeout 280 $C $R node dist/bench/device/gemm-probe.js --only "^(mmaF4x4x1x1|$BASE|$PIPE)(-s[24])?$|^$ENG-s[24]$" \
  --shapes 2048x2048xT512,8192x2048xT512,2048x8192xT512 --hold 200 --rounds 2 > $OUT/pipe-512.log 2>&1; echo "512 tokens rc $?"
grep '"variant"' $OUT/pipe-512.log | sed 's/"weightGBs.*//' | sort -t'"' -k4,4 -k8,8
grep FAILED $OUT/pipe-512.log | head
[[ ${1:-} == 512 ]] && exit 0
CLOCKS=$OUT/pipe-64-clocks.csv timeout 200 $C $R node dist/bench/device/gemm-probe.js --only "^dirF(4x2x1x2|2x2x2x2)(-u2|-u4)?(-pipe)?-s(4|8)$" \
  --shapes 8192x2048xT64,2048x8192xT64 --hold 200 --rounds 3 --cold 8 > $OUT/pipe-64.log 2>&1; echo "64 tokens rc $?"
grep '"variant"' $OUT/pipe-64.log | sed 's/"weightGBs.*//' | sort -t'"' -k4,4 -k8,8
grep -h 'clocks.sh' $OUT/pipe-*.log
