// The CPU backend's layout of int8 matrices (precision 'int8'): the rows quantised by the quantiser the GPU
// backend uses too (quant/int8-rows.ts: per-row f16 scales), laid out in panels for kernels.ts `matmulInt8`.

import { quantizeRowsInt8Yielding } from '../quant/int8-rows';
import type { WeightValues } from '../quant/weight-values';

/**
 * An int8 matrix in the kernels' layout (kernels.ts `matmulInt8`): per panel of 8 rows, for each pair of inputs
 * (2j, 2j+1) 16 bytes (rows 0..7, each [q[row][2j], q[row][2j+1]]; an odd k's last pair padded with 0), then
 * the 8 rows' f32 scales; rows past n are zero.
 */
export async function int8Panels(w: WeightValues, n: number, k: number): Promise<Uint8Array> {
  const { q, scales } = await quantizeRowsInt8Yielding(w, n, k);
  const panels = Math.ceil(n / 8);
  const kp = (k + 1) >> 1;
  const panelBytes = kp * 16 + 32;
  const out = new Uint8Array(panels * panelBytes);
  const bytes = new Int8Array(out.buffer);
  const floats = new Float32Array(out.buffer);
  for (let o = 0; o < n; o++) {
    const base = (o >> 3) * panelBytes + (o & 7) * 2;
    const row = o * k;
    for (let i = 0; i + 1 < k; i += 2) {
      bytes[base + i * 8] = q[row + i];
      bytes[base + i * 8 + 1] = q[row + i + 1];
    }
    if (k & 1) bytes[base + (k - 1) * 8] = q[row + k - 1];
    floats[((o >> 3) * panelBytes + kp * 16) / 4 + (o & 7)] = scales[o];
  }
  return out;
}

/** Bytes of thread scratch the int8 products need for T tokens of at most k inputs (kernels.ts `matmulInt8`). */
export function int8ScratchBytes(T: number, k: number): number {
  return T * (((k + 1) >> 1) * 4 + 4) + 64;
}
