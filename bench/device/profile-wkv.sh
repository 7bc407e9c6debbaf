#!/usr/bin/env bash
# Where a step's GPU time goes, one call (under the run tool's 600 s): the WKV variants timed alone at prefill lengths
# (bench/wkv.ts, every variant this device runs, the chunked ones with 64- and 256-lane preps side by side), then a
# kernel profile of the engine's defaults on 0.1B and 1.5B (bench/kernel-profile.ts, every dispatch repeated 8 times
# in its pass so a pass's own cost is shared). Every log is packed into $OUT/profile-wkv.tgz as it is written (the
# run tool returns 8 files at most).
# Here first: npx tsc -p . && bash bench/device/prepare.sh (and models/default.st out of the tree: README.md above).
# Run: carry [".carry/device", "dist"], command "bash bench/device/profile-wkv.sh 2>&1 | tail -80".
# PROFILE_ENV='VAR=VALUE ...' runs the profile with those settings (e.g. RWKV_WKV_PREFILL=chunk32-lane: its prep and scan
# as separate kernels in the prefill case, which the wkv section times only together).
set -o pipefail
R=${R-bash bench/device/remote.sh}
C=${C-bash bench/device/clocks.sh}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/profile-wkv-work; rm -rf "$W"; mkdir -p "$W"
pack() { tar czf "$OUT/profile-wkv.tgz" -C "$W" .; }
nvidia-smi -L | head -1
# With GOLDEN=1 (carry .carry/shared too), the golden check first, with PROFILE_ENV's settings.
if [[ ${GOLDEN:-0} == 1 ]]; then
  env ${PROFILE_ENV:-} RWKV_SHARED=.carry/shared timeout 120 $R node dist/bench/golden-check.js v7-tiny > $W/golden.log 2>&1; echo "golden (${PROFILE_ENV:-defaults}) rc $?"; pack
  grep -v 'artificially' $W/golden.log | grep -E '"v7-tiny.(f32|f16|f16-sgtile|f16-tiled|int8).seq|draws|kernel path' | head -8
fi
CLOCKS=$W/wkv-clocks.csv timeout 240 $C $R node dist/bench/run.js --sections wkv --wkv-shapes "${WKV_SHAPES:-1.5B,0.1B}" \
  --wkv-cases "${WKV_CASES:-prefill T=128,prefill T=512}" --out $W/wkv.json > $W/wkv.log 2>&1; echo "wkv rc $?"; pack
grep -E 'µs/token' $W/wkv.log | head -40
CLOCKS=$W/profile-clocks.csv env ${PROFILE_ENV:-} timeout 300 $C $R node dist/bench/run.js --sections profile --profile-shapes "${PROFILE_SHAPES:-0.1B,1.5B}" \
  --profile-repeat 8 --out $W/profile.json > $W/profile.log 2>&1; echo "profile (${PROFILE_ENV:-defaults}) rc $?"; pack
grep -E 'ms unprofiled|^ +[0-9.]+%' $W/profile.log | head -80
