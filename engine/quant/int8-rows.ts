// Per-output-row int8 quantisation (precision 'int8', issue #15's scheme), one quantiser for the GPU and the CPU
// backend: row r keeps scale[r] = the smallest f16 >= max|w[r][i]| / 127 (f16-scale.ts) and
// q[r][i] = round(w[r][i] / scale[r]) in -127..127, so w ≈ q * scale with an error of at most scale[r] / 2 per
// weight. A row of zeros keeps scale 0 and q 0.

import { f16BitsToF32 } from '../loader/dtype';
import { f16BitsAtLeast } from './f16-scale';

export interface Int8Rows {
  /** [n, k] row-major. */
  q: Int8Array;
  /** One scale per row, f16 bit patterns. */
  scaleBits: Uint16Array;
  /** The same scales as numbers (what the kernels multiply by). */
  scales: Float32Array;
}

/** Quantises the rows of `w` ([n, k] row-major). */
export function quantizeRowsInt8(w: Float32Array, n: number, k: number): Int8Rows {
  if (w.length !== n * k) throw new RangeError(`int8 quantiser: ${w.length} values are not ${n} rows of ${k}`);
  const q = new Int8Array(n * k);
  const scaleBits = new Uint16Array(n);
  const scales = new Float32Array(n);
  for (let r = 0; r < n; r++) {
    const base = r * k;
    let max = 0;
    for (let i = 0; i < k; i++) {
      const a = Math.abs(w[base + i]);
      if (!(a <= max)) max = a; // a NaN becomes the max, and is refused below
    }
    if (!Number.isFinite(max)) throw new RangeError(`int8 quantiser: row ${r} holds a non-finite weight`);
    const bits = f16BitsAtLeast(max / 127);
    const scale = f16BitsToF32(bits);
    scaleBits[r] = bits;
    scales[r] = scale;
    if (scale === 0) continue;
    const inv = 1 / scale;
    for (let i = 0; i < k; i++) q[base + i] = Math.max(-127, Math.min(127, Math.round(w[base + i] * inv)));
  }
  return { q, scaleBits, scales };
}

/** w[r][i] as the kernels see it: q * scale. */
export function dequantizeRowsInt8(q: Int8Array, scales: Float32Array, k: number): Float32Array {
  const out = new Float32Array(q.length);
  for (let r = 0; r < scales.length; r++) for (let i = 0; i < k; i++) out[r * k + i] = q[r * k + i] * scales[r];
  return out;
}
