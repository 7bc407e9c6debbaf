// The official runtimes normalise the embedding table with blocks.0.ln0 once at load time, rather than every
// token in the forward pass; every backend and version here does the same through this one function.

import { toF32 } from './loader/dtype';
import type { RawTensor } from './types';

/** emb.weight [V, C] as f32, each row layer-normed with ln0's weight and bias (eps 1e-5). */
export function normalizedEmbedding(embT: RawTensor, w0: ArrayLike<number>, b0: ArrayLike<number>): Float32Array {
  const [V, C] = embT.shape;
  const emb = Float32Array.from(toF32(embT));
  for (let row = 0; row < V; row++) {
    const r = emb.subarray(row * C, row * C + C);
    let mean = 0;
    for (let c = 0; c < C; c++) mean += r[c];
    mean /= C;
    let v = 0;
    for (let c = 0; c < C; c++) v += (r[c] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / C + 1e-5);
    for (let c = 0; c < C; c++) r[c] = (r[c] - mean) * inv * w0[c] + b0[c];
  }
  return emb;
}
