// Data the subgroup-matrix probes share (sgmat-layout-probe.ts, gemm-probe.ts): random f16 operands and their
// 16×16 block layout (each block 512 contiguous bytes, as shaders/sgtile_layout.wgsl and wlayout_blocks.wgsl store).

import { f32ToF16 } from '../../engine/loader/dtype';

/** Row-major [rows][k] f16 bits → blocks of 16×16, block (r/16, k/16) at ((r/16)·(k/16 count) + k/16)·256. */
export function tile(src: Uint16Array, rows: number, k: number): Uint16Array {
  const out = new Uint16Array(rows * k);
  const kb = k / 16;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < k; c++) out[((((r >> 4) * kb) + (c >> 4)) << 8) + ((r & 15) << 4) + (c & 15)] = src[r * k + c];
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
