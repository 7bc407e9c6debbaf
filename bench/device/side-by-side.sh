#!/usr/bin/env bash
# Issue #12's side-by-side run on the GPU machine, in two calls on one machine session (each under the run tool's
# 600 s; issue the second within the 30 s the machine stays warm):
#   part A: golden check (GPU draws against the host's included), the engine section on the three official shapes,
#           then the official baseline (Albatross batched + CUDA graph);
#   part B: the fla baseline (flash-linear-attention 0.5.2, CUDA graph; Triton autotunes for ~3.5 min on a fresh
#           machine).
# Here first:  npx tsc -p . && bash bench/device/prepare.sh
#              mkdir -p .carry/torch/whl && cp -r ../shared/perf-baselines/* .carry/torch/
#              python3 -m pip download --no-deps -d .carry/torch/whl flash-linear-attention==0.5.2 fla-core==0.5.2
#              (and models/default.st out of the tree for the call: README.md above)
# Run:   carry [".carry/device", "dist", ".carry/shared", ".carry/torch"],
#        command "bash bench/device/side-by-side.sh A 2>&1 | tail -40", then the same with B.
# ENGINE_ENV='VAR=VALUE ...' runs part A's golden check and engine section with those settings (a knob that won its
# A/B earlier in the same machine session, before it is a default).
# Tables: python3 ../shared/perf-baselines/make_tables.py on the returned JSON, or read the summary lines.
set -o pipefail
PART=${1:?part A or B}
R="bash bench/device/remote.sh"
C="bash bench/device/clocks.sh"
TORCH=$PWD/.carry/torch
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache
nvidia-smi -L | head -1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $TORCH/whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site
if [[ $PART == A ]]; then
  # The official CUDA extension builds (nvcc) while the golden check runs; the engine section waits for it.
  ( cd $TORCH && timeout 240 python3 -c "import official_lib; print('official extension ready')" > /tmp/official_build.log 2>&1 ) &
  BUILD=$!
  env ${ENGINE_ENV:-} RWKV_SHARED=.carry/shared timeout 120 $R node dist/bench/golden-check.js v7-tiny > $OUT/golden.log 2>&1; echo "golden rc $?"
  grep -v 'artificially' $OUT/golden.log | grep -E '"v7-tiny.(f32|f16|f16-sgtile|f16-sgtile-wide|f16-by-input|int8).seq|draws' | head -10
  wait $BUILD; echo "official build: $(tail -1 /tmp/official_build.log)"
  echo "engine settings: ${ENGINE_ENV:-defaults}"
  CLOCKS=$OUT/engine-clocks.csv env ${ENGINE_ENV:-} timeout 330 $C $R node dist/bench/run.js --sections engine --seconds 1 --shapes 1.5B,0.4B,0.1B --out $OUT/engine.json > $OUT/engine.log 2>&1; echo "engine rc $?"
  grep -h 'tok/s\|clocks.sh' $OUT/engine.log | grep -v artificially
  ( cd $TORCH && timeout 170 python3 bench_torch.py --impl official --out $OUT/official.json 2>&1 | grep -v -i warn > $OUT/official.log; echo "official rc $?"; tail -12 $OUT/official.log )
else
  ( cd $TORCH && timeout 540 python3 bench_torch.py --impl fla --out $OUT/fla.json 2>&1 | grep -v -i warn | grep -v "^Autotuning kernel" > $OUT/fla.log; echo "fla rc $?"; tail -12 $OUT/fla.log )
fi
