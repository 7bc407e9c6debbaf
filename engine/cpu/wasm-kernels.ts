// Loads the CPU backend's WebAssembly SIMD kernels (built from engine/cpu/kernels/ into kernels.wasm beside
// this file by scripts/build-kernels.sh) and instantiates them over a shared memory. Every thread that
// computes instantiates the same compiled module over the same memory.

import * as fs from 'fs';
import * as path from 'path';
import { withNativeProducts } from './native-products';

/** The kernels' exports (see engine/cpu/kernels/kernels.ts for what each computes); addresses are bytes. */
export interface CpuKernels {
  matmul(
    w: number, n: number, k: number, kind: number,
    x: number, xs: number, y: number, ys: number, T: number,
    act: number, accum: number, p0: number, p1: number, scratch: number,
  ): void;
  /** 1 in the relaxed-SIMD build, whose multiply-adds fuse; 0 in the plain one. */
  fusedMultiplyAdd(): number;
  layerNormRows(x: number, rows: number, R: number, C: number, w: number, b: number, out: number): void;
  lnShift(x: number, T: number, C: number, ln: number, xn: number, prevAddr: number, mix: number, M: number, out: number, region: number): void;
  lnShiftTokens(
    x: number, t0: number, t1: number, C: number, ln: number, xn: number, prevAddr: number, mix: number, M: number, out: number,
    region: number, before: number,
  ): void;
  embed(table: number, wide: number, ids: number, T: number, C: number, out: number): void;
  prep(tm: number, region: number, T: number, C: number, N: number, p: number, vfirst: number, first: number): void;
  wkv(tm: number, region: number, C: number, N: number, head: number, t0: number, n: number, s: number): void;
  post(tm: number, region: number, T: number, C: number, N: number, p: number, out: number): void;
  deepEmbedGate(
    T: number, C: number, F: number, ids: number, table: number, wide: number,
    se: number, xn: number, p: number, h: number, scratch: number,
  ): void;
  gatedAdd(x: number, r: number, v: number, n: number): void;
  finchMix(tm: number, region: number, T: number, C: number, N: number, p: number, xn: number, unused: number): void;
  finchWkv(tm: number, region: number, C: number, N: number, head: number, t0: number, n: number, s: number, p: number, dynamic: number): void;
  finchPost(tm: number, region: number, T: number, C: number, N: number, p: number, out: number, unused: number): void;
  rwkv4Wkv(tm: number, region: number, C: number, c0: number, cn: number, t0: number, n: number, s: number, decay: number, out: number): void;
  /** Largest value, count above -Infinity and sum of exp(x - largest) of n floats at x, into out (f32, i32, f64). */
  softmaxStats(x: number, n: number, out: number): void;
  /** The cap best of n floats at x, best first, ties by lower row: values at hv, rows at hr; returns how many. */
  topEntries(x: number, n: number, cap: number, hv: number, hr: number): number;
  /** exp of n floats (n a multiple of 4): the kernels' vector exp, for its accuracy test. */
  expInto(x: number, n: number, out: number): void;
  /** The inputs of a product over int8 (kind 2) or i16 (kind 3) panels, quantized into scratch as matmul does. */
  quantizeProductInputs(kind: number, k: number, x: number, xs: number, T: number, scratch: number): void;
}

/** Where the built modules live: beside this file in dist/. */
export const KERNELS_FILE = path.join(__dirname, 'kernels.wasm');
/** The same kernels with relaxed SIMD's fused multiply-add. */
export const RELAXED_KERNELS_FILE = path.join(__dirname, 'kernels-relaxed.wasm');

/** Largest memory the module declares (wasm32: 65536 pages of 64 KiB). */
export const MAX_PAGES = 65536;

export type KernelVariant = 'simd' | 'relaxed-simd';

let compiled: { module: WebAssembly.Module; variant: KernelVariant } | null = null;

function read(file: string): Uint8Array<ArrayBuffer> {
  if (!fs.existsSync(file)) throw new Error(`the CPU kernels are not built (${file} is missing); run \`npm run build\``);
  return new Uint8Array(fs.readFileSync(file));
}

/**
 * The kernels, compiled once per process: with fused multiply-add where the runtime has relaxed SIMD, else plain
 * SIMD. Node 22+ has it; Node 20's V8 has the finished implementation behind a flag, turned on here (it only adds
 * the instructions to what WebAssembly validates) unless RWKV_CPU_RELAXED_SIMD=0. RWKV_CPU_KERNELS=simd forces
 * the plain build.
 */
export function kernelModule(): { module: WebAssembly.Module; variant: KernelVariant } {
  if (compiled) return compiled;
  if (process.env.RWKV_CPU_KERNELS !== 'simd' && fs.existsSync(RELAXED_KERNELS_FILE)) {
    const relaxed = read(RELAXED_KERNELS_FILE);
    if (!WebAssembly.validate(relaxed) && process.env.RWKV_CPU_RELAXED_SIMD !== '0') {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      (require('v8') as typeof import('v8')).setFlagsFromString('--experimental-wasm-relaxed-simd');
    }
    if (WebAssembly.validate(relaxed)) return (compiled = { module: new WebAssembly.Module(relaxed), variant: 'relaxed-simd' });
  }
  return (compiled = { module: new WebAssembly.Module(read(KERNELS_FILE)), variant: 'simd' });
}

/** The kernels over `memory`, integer products through the native addon where it loaded (native-products.ts) unless `native` is false. */
export function instantiateKernels(memory: WebAssembly.Memory, module: WebAssembly.Module = kernelModule().module, native = true): CpuKernels {
  const instance = new WebAssembly.Instance(module, { env: { memory, abort: () => { throw new Error('CPU kernel abort'); } } });
  const kernels = instance.exports as unknown as CpuKernels;
  return native ? withNativeProducts(kernels, memory) : kernels;
}
