// The CPU backend's i16 matrices (kernels.ts `matmulI16`, kind 3): an f16 matrix's rows as 16-bit integers with
// one f32 scale per row, q[row][i] = round(w[row][i] / scale[row]), |q| <= I16_WEIGHT_RANGE, scale = max|w| / range.
// Same 16 bits a weight as f16 (plus 4 bytes a row), but the kernels multiply pairs of them with one integer dot
// product instead of widening each half to f32 first. The weight error is at most scale / 2 = max|w| / 32766 per
// weight: below f16's own rounding (2^-11 of |w|) for every weight above 1/16 of its row's largest.

import { f16Values, maxMagnitude, maxMagnitudeBits, WEIGHTS_PER_YIELD, yieldToEventLoop, type WeightValues } from '../quant/weight-values';

/**
 * Largest weight code: the kernels sum two dots (four products) of weight codes and ±32767 input codes in i32,
 * and 4 * 16383 * 32767 < 2^31 (kernels.ts I16_INPUT_RANGE).
 */
export const I16_WEIGHT_RANGE = 16383;

/** The rows of an [n, k] matrix (f16 bits or f32 values) as codes and f32 scales; w ≈ q * scale. */
export interface I16Rows {
  q: Int16Array;
  scales: Float32Array;
}

/** Rows [from, to) of `w` into `out`. */
function quantizeRowRange(w: WeightValues, k: number, out: I16Rows, from: number, to: number): void {
  const table = w instanceof Uint16Array ? f16Values() : null;
  for (let r = from; r < to; r++) {
    const base = r * k;
    let max: number;
    if (table) {
      const m = maxMagnitudeBits(w as Uint16Array, base, base + k);
      max = m >= 0x7c00 ? NaN : table[m]; // 0x7c00 and up: infinities and NaNs
    } else max = maxMagnitude(w as Float32Array, base, base + k);
    if (!Number.isFinite(max)) throw new RangeError(`i16 quantiser: row ${r} holds a non-finite weight`);
    const scale = Math.fround(max / I16_WEIGHT_RANGE);
    out.scales[r] = scale;
    if (scale === 0) continue; // a row of zeros (codes already 0)
    const inv = 1 / scale;
    if (table) codesFromF16Bits(w as Uint16Array, table, inv, out.q, base, base + k);
    else codesFromValues(w as Float32Array, inv, out.q, base, base + k);
  }
}

// No clamp: |w| <= max, and scale = max / 16383 rounded to f32 (at most 2^-24 off), so |w| / scale rounds to at
// most 16383. Rounding is floor(x + 0.5) as an integer truncation of the positive x + 16384.5 (Math.round and
// Math.floor took 10 ns a weight, Math.round mispredicting on half of them): it rounds halves up like
// Math.round, and can differ from it only where x lies within 2^-39 of a half-integer (the sum's rounding), by
// one code at half a step's distance. The loops live in functions of their own, which V8 compiles tighter.

function codesFromF16Bits(bits: Uint16Array, table: Float64Array, inv: number, q: Int16Array, from: number, to: number): void {
  for (let i = from; i < to; i++) q[i] = ((table[bits[i]] * inv + 16384.5) | 0) - 16384;
}

function codesFromValues(vals: Float32Array, inv: number, q: Int16Array, from: number, to: number): void {
  for (let i = from; i < to; i++) q[i] = ((vals[i] * inv + 16384.5) | 0) - 16384;
}

/** Quantises `w` ([n, k] row-major), yielding to the event loop every WEIGHTS_PER_YIELD weights. */
export async function quantizeRowsI16(w: WeightValues, n: number, k: number): Promise<I16Rows> {
  if (w.length !== n * k) throw new RangeError(`i16 quantiser: ${w.length} values are not ${n} rows of ${k}`);
  const out: I16Rows = { q: new Int16Array(n * k), scales: new Float32Array(n) };
  const step = Math.max(1, Math.floor(WEIGHTS_PER_YIELD / Math.max(1, k)));
  for (let r = 0; r < n; r += step) {
    if (r > 0) await yieldToEventLoop();
    quantizeRowRange(w, k, out, r, Math.min(n, r + step));
  }
  return out;
}

/**
 * An i16 matrix in the kernels' layout (kernels.ts `matmulI16`): per panel of 8 rows, for each quad of inputs
 * 4j..4j+3, 64 bytes (pair 2j for rows 0..3, pair 2j for rows 4..7, pair 2j+1 for rows 0..3, then 4..7; each
 * row's pair [q[row][2i], q[row][2i+1]]), then the 8 rows' f32 scales and 32 bytes of padding (panels start on
 * cache lines); inputs past k and rows past n are zero.
 */
export function i16Panels(rows: I16Rows, n: number, k: number): Uint8Array {
  const { q, scales } = rows;
  const panels = Math.ceil(n / 8);
  const kq = (k + 3) >> 2;
  const panelBytes = kq * 64 + 64;
  const out = new Uint8Array(panels * panelBytes);
  const codes = new Int16Array(out.buffer);
  // Two codes a write (little-endian: element 2i in the low half, as the kernel's i16 lanes read them).
  const pairs = new Int32Array(out.buffer);
  const floats = new Float32Array(out.buffer);
  const whole = k & ~3;
  for (let o = 0; o < n; o++) {
    // In i32 units: the panel's start plus this row's place within a 4-row half; quad j adds 16, its second pair 8.
    const at = (o >> 3) * (panelBytes >> 2) + ((o & 7) >> 2) * 4 + (o & 3);
    const src = o * k;
    rowPairs(q, src, whole, pairs, at);
    for (let i = whole; i < k; i++) codes[2 * (at + (i >> 2) * 16 + ((i >> 1) & 1) * 8) + (i & 1)] = q[src + i];
    floats[((o >> 3) * panelBytes + kq * 64) / 4 + (o & 7)] = scales[o];
  }
  return out;
}

/** Inputs [0, whole) of one row (whole a multiple of 4) into its pair slots from `at` on. */
function rowPairs(q: Int16Array, src: number, whole: number, pairs: Int32Array, at: number): void {
  for (let i = 0; i < whole; i += 4, at += 16) {
    pairs[at] = (q[src + i] & 0xffff) | (q[src + i + 1] << 16);
    pairs[at + 8] = (q[src + i + 2] & 0xffff) | (q[src + i + 3] << 16);
  }
}

/** Bytes of thread scratch the i16 products need for T tokens of at most k inputs (kernels.ts `matmulI16`). */
export function i16ScratchBytes(T: number, k: number): number {
  return T * (((k + 3) >> 2) * 8 + 4) + 64;
}
