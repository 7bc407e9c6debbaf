// Quantisation scales are stored as f16 (issue #15: "f16 scales"), on the GPU and the CPU alike. A scale is
// rounded *up* to the next f16, so every weight divided by it stays within the code range and nothing clamps:
// the only error left is the rounding to the nearest code. Scales under 2^-14 (int8 rows whose largest weight is
// under 0.0078, nf4 blocks under 6.1e-5) are f16 subnormals, coarser steps: the bound of half a scale per weight
// still holds, but the scale may overshoot the row's largest weight by more than one part in 1024.

import { f16BitsToF32, f32ToF16Bits } from '../loader/dtype';

/** Bit pattern of the smallest f16 that is >= x (x >= 0, finite; above the f16 range: an error naming x). */
export function f16BitsAtLeast(x: number): number {
  if (!(x >= 0) || !Number.isFinite(x)) throw new RangeError(`a quantisation scale must be finite and >= 0, got ${x}`);
  let h = f32ToF16Bits(x);
  if (f16BitsToF32(h) < x) h++; // positive f16 bit patterns are ordered like their values
  if (h >= 0x7c00) throw new RangeError(`a quantisation scale of ${x} is beyond the f16 range (weights too large to quantise)`);
  return h;
}
