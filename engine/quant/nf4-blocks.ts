// NF4 quantisation (precision 'nf4', the 4-bit NormalFloat of QLoRA as web-rwkv uses it): the weights, taken
// as one flat array, in blocks of 64; each block keeps absmax = the smallest f16 >= max|w| of the block
// (f16-scale.ts) and each weight the index (0..15) of the code nearest to w / absmax. The codes are the NF4
// code book: quantiles of a standard normal scaled to [-1, 1], with an exact 0. Two codes a byte, eight a u32
// word, element e in bits 4·(e mod 8) of word e / 8 (the GPU include weights_nf4.wgsl reads them so).

import { f16BitsToF32 } from '../loader/dtype';
import { f16BitsAtLeast } from './f16-scale';

/** Weights per absmax. */
export const NF4_BLOCK = 64;

/** The NF4 code book (QLoRA, Dettmers et al. 2023, appendix E), ascending. */
export const NF4_CODES: readonly number[] = [
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
];

/** Midpoints between neighbouring codes: a value below MID[j] is nearer code j than j + 1. */
const MID = NF4_CODES.slice(1).map((c, j) => (c + NF4_CODES[j]) / 2);

/** Index of the code nearest to v (v in [-1, 1]; ties to the lower code). */
function nearestCode(v: number): number {
  // Binary search over the 15 midpoints: 4 comparisons.
  let lo = 0;
  let hi = 15;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (v <= MID[m]) hi = m;
    else lo = m + 1;
  }
  return lo;
}

export interface Nf4Blocks {
  /** ceil(length / 8) words, 8 codes each; codes past the end are 7 (the code 0). */
  words: Uint32Array;
  /** One absmax per block (ceil(length / 64)), f16 bit patterns. */
  absmaxBits: Uint16Array;
}

/** Quantises `w` (any length) as one flat array of 64-weight blocks. */
export function quantizeNf4(w: Float32Array): Nf4Blocks {
  const blocks = Math.ceil(w.length / NF4_BLOCK);
  const words = new Uint32Array(blocks * (NF4_BLOCK / 8));
  const absmaxBits = new Uint16Array(blocks);
  for (let b = 0; b < blocks; b++) {
    const from = b * NF4_BLOCK;
    const to = Math.min(w.length, from + NF4_BLOCK);
    let max = 0;
    for (let e = from; e < to; e++) {
      const a = Math.abs(w[e]);
      if (!(a <= max)) max = a; // a NaN becomes the max, and is refused below
    }
    if (!Number.isFinite(max)) throw new RangeError(`nf4 quantiser: block ${b} holds a non-finite weight`);
    const bits = f16BitsAtLeast(max);
    absmaxBits[b] = bits;
    const inv = max === 0 ? 0 : 1 / f16BitsToF32(bits);
    for (let e = from; e < from + NF4_BLOCK; e++) {
      const code = e < to ? nearestCode(w[e] * inv) : 7;
      words[e >> 3] |= code << (4 * (e & 7));
    }
  }
  return { words: words.subarray(0, Math.ceil(w.length / 8)), absmaxBits };
}

/** The weights as the kernels see them: code × absmax of the block. */
export function dequantizeNf4(q: Nf4Blocks, length: number): Float32Array {
  const out = new Float32Array(length);
  for (let e = 0; e < length; e++) {
    const code = (q.words[e >> 3] >>> (4 * (e & 7))) & 15;
    out[e] = Math.fround(Math.fround(NF4_CODES[code]) * f16BitsToF32(q.absmaxBits[Math.floor(e / NF4_BLOCK)])); // f32, as on the GPU
  }
  return out;
}
