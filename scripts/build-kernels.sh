#!/usr/bin/env bash
# Builds the CPU backend's WebAssembly SIMD kernels (engine/cpu/kernels/*.ts, AssemblyScript) into
# dist/engine/cpu/kernels.wasm, which ships inside the package: installs never compile anything.
# Memory is imported and shared so every worker thread runs the same module over the same weights.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist/engine/cpu
# Two builds of the same source: plain SIMD (every runtime), and with relaxed SIMD's fused multiply-add
# (Node 22+; engine/cpu/wasm-kernels.ts picks it when the runtime validates it).
flags=(-O3 --runtime stub --noAssert --importMemory --sharedMemory --initialMemory 1 --maximumMemory 65536
  --enable simd --enable threads --noExportMemory)
npx --no-install asc engine/cpu/kernels/kernels.ts -o dist/engine/cpu/kernels.wasm "${flags[@]}"
npx --no-install asc engine/cpu/kernels/kernels.ts -o dist/engine/cpu/kernels-relaxed.wasm "${flags[@]}" --enable relaxed-simd
