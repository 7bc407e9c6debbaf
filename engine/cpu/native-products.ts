// Loads the native AVX2 matrix products (engine/cpu/native/products.c, built by scripts/build-native.sh into
// dist/engine/cpu/native/ and shipped in the package: installs compile nothing) and puts them behind the
// WebAssembly kernels' `matmul` for the calls they cover. Everything else, and every machine without the built
// addon or without AVX2 (arm64, other systems, old x86), runs the WebAssembly kernels: the same bits either way.
// RWKV_CPU_NATIVE=off turns the addon off; =on makes its absence an error (CI checks it ran).

import * as fs from 'fs';
import * as path from 'path';
import type { CpuKernels } from './wasm-kernels';

/** The addon's one export (see products.c `Products`). */
interface NativeAddon {
  products(
    memory: Uint8Array, w: number, n: number, k: number, kind: number, scratch: number,
    y: number, ys: number, T: number, act: number, accum: number, p0: number, p1: number,
  ): void;
  /** f16 panels against f32 inputs (products.c `HalfProducts`); fused 1 needs `fma`. */
  halfProducts(
    memory: Uint8Array, w: number, n: number, k: number, x: number, xs: number,
    y: number, ys: number, T: number, act: number, accum: number, p0: number, p1: number, fused: number,
  ): void;
  /** Whether this CPU has fused multiply-add (FMA3). */
  readonly fma: boolean;
}

/** Where the build puts the addon for this platform (only linux-x64 is built). */
export const NATIVE_PRODUCTS_FILE = path.join(__dirname, 'native', `products-${process.platform}-${process.arch}.node`);

/** Which implementation runs the f16 and integer products: the native AVX2 tiles or WebAssembly alone. */
export type ProductsPath = 'native-avx2' | 'wasm';

let loaded: { addon: NativeAddon | null; why: string } | null = null;

/** The addon, loaded once per thread; null (with the reason) when it is off, absent or refuses this CPU. */
export function nativeAddon(): { addon: NativeAddon | null; why: string } {
  if (loaded) return loaded;
  const mode = process.env.RWKV_CPU_NATIVE ?? 'auto';
  if (mode !== 'auto' && mode !== 'on' && mode !== 'off') throw new RangeError(`RWKV_CPU_NATIVE must be auto, on or off, got '${mode}'`);
  if (mode === 'off') return (loaded = { addon: null, why: 'RWKV_CPU_NATIVE=off' });
  let why: string;
  if (!fs.existsSync(NATIVE_PRODUCTS_FILE)) why = `no native products for ${process.platform}-${process.arch} (${NATIVE_PRODUCTS_FILE})`;
  else {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return (loaded = { addon: require(NATIVE_PRODUCTS_FILE) as NativeAddon, why: 'loaded' });
    } catch (e) {
      why = `the native products did not load: ${(e as Error).message}`;
    }
  }
  if (mode === 'on') throw new Error(`RWKV_CPU_NATIVE=on, but ${why}`);
  return (loaded = { addon: null, why });
}

/** The path this process's CPU kernels take for f16 and integer products. */
export function productsPath(): ProductsPath {
  return nativeAddon().addon ? 'native-avx2' : 'wasm';
}

/**
 * The kernels with `matmul` sent to the addon where it covers the call: int8, i16 and f16 panels, from one token,
 * with no activation or relu squared (tanh and sigmoid stay on WebAssembly's own exp). One token reads each weight
 * once and is bound by memory: the native one-token tiles prefetch their weight streams and draw more than
 * WebAssembly (one Zen 3 core, a 65,536 × 320 head: i16 17.7 against 13.7 GB/s, int8 18.6 against 17.4); f16
 * widening is what bounds WebAssembly's decode. Integer inputs are quantized by
 * the WebAssembly kernels (quantizeProductInputs), the same bytes as their own path; f16 sums fuse their
 * multiply-adds exactly where the WebAssembly build does (fusedMultiplyAdd), so either path gives the same bits.
 */
export function withNativeProducts(kernels: CpuKernels, memory: WebAssembly.Memory, addon: NativeAddon | null = nativeAddon().addon): CpuKernels {
  if (!addon) return kernels;
  let view = new Uint8Array(memory.buffer);
  const wasmMatmul = kernels.matmul;
  const fused = kernels.fusedMultiplyAdd();
  // Plain SIMD's separate product and sum need only AVX2; the relaxed build's fused ones need FMA too.
  const half = fused === 0 || addon.fma;
  const matmul: CpuKernels['matmul'] = (w, n, k, kind, x, xs, y, ys, T, act, accum, p0, p1, scratch) => {
    const covered = (kind === 0 ? half : kind === 2 || kind === 3) && (act === 0 || act === 3);
    if (!covered) {
      wasmMatmul(w, n, k, kind, x, xs, y, ys, T, act, accum, p0, p1, scratch);
      return;
    }
    // A grown shared memory keeps its base address; a new view only sees the new length.
    if (view.byteLength !== memory.buffer.byteLength) view = new Uint8Array(memory.buffer);
    if (kind === 0) {
      addon.halfProducts(view, w, n, k, x, xs, y, ys, T, act, accum, p0, p1, fused);
      return;
    }
    kernels.quantizeProductInputs(kind, k, x, xs, T, scratch);
    addon.products(view, w, n, k, kind, scratch, y, ys, T, act, accum, p0, p1);
  };
  return { ...kernels, matmul };
}
