#!/usr/bin/env bash
# Makes a fresh checkout runnable: a Vulkan driver for WebGPU (Mesa lavapipe on machines without a GPU
# driver), npm dependencies when missing or stale, and the TypeScript build. Cheap when nothing changed,
# so `npm test` and `npm start` run it every time.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -s)" = Linux ]; then
  gpu_icd=$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/nvidia/share/vulkan/icd.d/*.json 2>/dev/null | grep -v lvp_icd || true)
  if [ -z "$gpu_icd" ]; then
    bash .ci/install-lavapipe
  fi
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # `npm install`, not `npm ci`: npm 11's ci refuses every lock file here over cbor-x's optional
  # per-platform packages ("Missing: @cbor-extract/... from lock file"); install still follows the lock.
  npm install --no-audit --no-fund
fi

npx tsc -p tsconfig.json
# The CPU backend's WebAssembly kernels: rebuilt only when a kernel source is newer than the module.
if [ ! -f dist/engine/cpu/kernels.wasm ] || [ ! -f dist/engine/cpu/kernels-relaxed.wasm ] ||
  [ -n "$(find engine/cpu/kernels scripts/build-kernels.sh -newer dist/engine/cpu/kernels-relaxed.wasm -print -quit)" ]; then
  bash scripts/build-kernels.sh
fi
# The native integer products (x86-64 Linux; skipped elsewhere): rebuilt when their source is newer.
native=dist/engine/cpu/native/products-linux-x64.node
if [ ! -f "$native" ] || [ -n "$(find engine/cpu/native scripts/build-native.sh -newer "$native" -print -quit)" ]; then
  bash scripts/build-native.sh
fi
