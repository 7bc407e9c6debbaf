#!/usr/bin/env bash
# Builds the CPU backend's native AVX2 matrix products (engine/cpu/native/products.c) into
# dist/engine/cpu/native/products-linux-x64.node, which ships inside the package: installs compile nothing
# (n8n installs with --ignore-scripts). Only on x86-64 Linux with a C compiler and Node's headers; anywhere else
# the package runs the WebAssembly kernels, which compute the same bits (engine/cpu/native-products.ts).
# RWKV_NATIVE_BUILD=required makes a missing compiler or header an error (CI, packing a release).
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/engine/cpu/native/products-linux-x64.node
skip() {
  if [ "${RWKV_NATIVE_BUILD:-}" = required ]; then echo "build-native: $1" >&2; exit 1; fi
  echo "build-native: skipped ($1); the CPU backend will use its WebAssembly kernels" >&2
  exit 0
}
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || skip "not x86-64 Linux"
cc=${CC:-cc}
command -v "$cc" > /dev/null || skip "no C compiler ($cc)"
inc=$(node -p "require('path').join(process.execPath, '..', '..', 'include', 'node')")
[ -f "$inc/node_api.h" ] || skip "no Node-API headers in $inc"
mkdir -p "$(dirname "$out")"
# -nostdlib: no C library, so the addon loads on glibc and musl alike; -ffp-contract=off: no fused multiply-add,
# the same float operations as the WebAssembly kernels.
"$cc" -O2 -std=gnu11 -fPIC -shared -nostdlib -fvisibility=hidden -ffp-contract=off -Wall -Wextra -Werror \
  -I"$inc" -o "$out.tmp" engine/cpu/native/products.c
# Anything it needs from outside must be Node-API (resolved in the node binary), nothing from a C library.
if command -v nm > /dev/null; then
  extra=$(nm -u "$out.tmp" | awk '{print $2}' | grep -v '^napi_' || true)
  if [ -n "$extra" ]; then rm -f "$out.tmp"; echo "build-native: unexpected imports: $extra" >&2; exit 1; fi
fi
mv "$out.tmp" "$out"
