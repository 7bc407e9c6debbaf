// Loads the CPU backend's WebAssembly SIMD kernels (built from engine/cpu/kernels/ into kernels.wasm beside
// this file by scripts/build-kernels.sh) and instantiates them over a shared memory. Every thread that
// computes instantiates the same compiled module over the same memory.

import * as fs from 'fs';
import * as path from 'path';

/** The kernels' exports (see engine/cpu/kernels/kernels.ts for what each computes); addresses are bytes. */
export interface CpuKernels {
  matmul(
    w: number, n: number, k: number, wide: number,
    x: number, xs: number, y: number, ys: number, T: number,
    act: number, accum: number, p0: number, p1: number, scratch: number,
  ): void;
  layerNormRows(x: number, rows: number, R: number, C: number, w: number, b: number, out: number): void;
  lnShift(x: number, T: number, C: number, ln: number, xn: number, prevAddr: number, mix: number, M: number, out: number, region: number): void;
  embed(table: number, wide: number, ids: number, T: number, C: number, out: number): void;
  prep(tm: number, region: number, T: number, C: number, N: number, p: number, vfirst: number, first: number): void;
  wkv(tm: number, region: number, C: number, N: number, head: number, t0: number, n: number, s: number): void;
  post(tm: number, region: number, T: number, C: number, N: number, p: number, out: number): void;
}

/** Where the built module lives: beside this file in dist/, whichever file (.ts via a loader, or .js) runs. */
export const KERNELS_FILE = path.join(__dirname, 'kernels.wasm');

/** Largest memory the module declares (wasm32: 65536 pages of 64 KiB). */
export const MAX_PAGES = 65536;

let compiled: WebAssembly.Module | null = null;

export function kernelModule(): WebAssembly.Module {
  if (compiled) return compiled;
  if (!fs.existsSync(KERNELS_FILE)) {
    throw new Error(`the CPU kernels are not built (${KERNELS_FILE} is missing); run \`npm run build\``);
  }
  compiled = new WebAssembly.Module(fs.readFileSync(KERNELS_FILE));
  return compiled;
}

export function instantiateKernels(memory: WebAssembly.Memory, module: WebAssembly.Module = kernelModule()): CpuKernels {
  const instance = new WebAssembly.Instance(module, { env: { memory, abort: () => { throw new Error('CPU kernel abort'); } } });
  return instance.exports as unknown as CpuKernels;
}
