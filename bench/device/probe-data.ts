// Data the subgroup-matrix probes share (sgmat-layout-probe.ts, gemm-probe.ts): random f16 operands and their
// 16×16 block layout (each block 512 contiguous bytes, as shaders/sgtile_layout.wgsl and wlayout_blocks.wgsl store).

import { f16BitsToF32, f32ToF16 } from '../../engine/loader/dtype';

/**
 * Row-major [rows][k] f16 bits → blocks of 16×16, each 256 contiguous halves. 'strip' order (the engine's): block
 * (r/16, k/16) at ((r/16)·(k/16 count) + k/16)·256; 'input' order (gemm-probe's kmaj): at ((k/16)·(rows/16) + r/16)·256.
 */
export function tile(src: Uint16Array, rows: number, k: number, order: 'strip' | 'input' = 'strip'): Uint16Array {
  const out = new Uint16Array(rows * k);
  const kb = k / 16;
  const rb = rows / 16;
  const block = order === 'strip' ? (r: number, c: number) => (r >> 4) * kb + (c >> 4) : (r: number, c: number) => (c >> 4) * rb + (r >> 4);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < k; c++) out[(block(r, c) << 8) + ((r & 15) << 4) + (c & 15)] = src[r * k + c];
  }
  return out;
}

/** `count` f16 values uniform in [-scale, scale), from a small LCG (the same data for the same seed). */
export function randomHalves(count: number, seed: number, scale: number): Uint16Array {
  let s = seed >>> 0 || 1;
  const f = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    f[i] = ((s / 4294967296) * 2 - 1) * scale;
  }
  return f32ToF16(f);
}

/** The WGSL both probes' products start with: the extensions, sizes (T tokens, N outputs, K inputs) and A, W, Y. */
export const PRODUCT_PROBE_HEADER = `enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);
struct P { T: u32, N: u32, K: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> A: array<f16>;
@group(0) @binding(2) var<storage, read> W: array<f16>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
`;

/** One product element computed in float64 over the f16 inputs: token t, output o, its value. */
export type ProductSample = [t: number, o: number, value: number];

/**
 * 64 elements of Y = A·Wᵀ (A [t][k], W [n][k], f16 bits, row-major) spread over the product, in float64, so a
 * kernel's result is checked on them without computing the whole product on the CPU.
 */
export function sampleProduct(aBits: Uint16Array, wBits: Uint16Array, sh: { n: number; k: number; t: number }): ProductSample[] {
  const samples: ProductSample[] = [];
  for (let i = 0; i < 64; i++) {
    const t = (i * 37) % sh.t, o = (i * 101 + 5) % sh.n;
    let acc = 0;
    for (let k = 0; k < sh.k; k++) acc += f16BitsToF32(aBits[t * sh.k + k]) * f16BitsToF32(wBits[o * sh.k + k]);
    samples.push([t, o, acc]);
  }
  return samples;
}

/** Relative L2 error on the samples of a result [split][t][n] whose `split` partial sums add up to Y. */
export function sampledError(out: Float32Array, samples: readonly ProductSample[], sh: { n: number; t: number }, split = 1): number {
  let num = 0, den = 0;
  for (const [t, o, r] of samples) {
    let got = 0;
    for (let z = 0; z < split; z++) got += out[z * sh.t * sh.n + t * sh.n + o];
    num += (got - r) ** 2;
    den += r * r;
  }
  return Math.sqrt(num / den);
}
