// Per-output-row int8 quantisation (precision 'int8', issue #15's scheme), one quantiser for the GPU and the CPU
// backend: row r keeps scale[r] = the smallest f16 >= max|w[r][i]| / 127 (f16-scale.ts) and
// q[r][i] = round(w[r][i] / scale[r]) in -127..127, so w ≈ q * scale with an error of at most scale[r] / 2 per
// weight. A row of zeros keeps scale 0 and q 0.
//
// Speed (a 1.5B model holds 1.3 billion weights to quantise at load): two passes per row over a typed array, no
// allocation per weight; f16 input is read as bits (weight-values.ts), its row maximum found on the bits alone
// (positive f16 patterns are ordered like their values) and each weight decoded through the value table.

import { f16BitsToF32 } from '../loader/dtype';
import { f16BitsAtLeast } from './f16-scale';
import { bitPairs, f16Values, maxMagnitude, maxMagnitudeBits, maxMagnitudePairs, WEIGHTS_PER_YIELD, yieldToEventLoop, type WeightValues } from './weight-values';

export interface Int8Rows {
  /** [n, k] row-major. */
  q: Int8Array;
  /** One scale per row, f16 bit patterns. */
  scaleBits: Uint16Array;
  /** The same scales as numbers (what the kernels multiply by). */
  scales: Float32Array;
}

function checkShape(w: WeightValues, n: number, k: number): void {
  if (w.length !== n * k) throw new RangeError(`int8 quantiser: ${w.length} values are not ${n} rows of ${k}`);
}

function newRows(n: number, k: number): Int8Rows {
  return { q: new Int8Array(n * k), scaleBits: new Uint16Array(n), scales: new Float32Array(n) };
}

// The code of x = w / scale is Math.round(x), computed without Math.round's data-dependent branch (a random
// half of the weights mispredicted it: most of the quantiser's time). floor(x + 0.5) is Math.round(x) whenever
// the sum is not an integer (rounding a sum that lies between two integers cannot cross either); an integer
// sum (x a half-integer, or within the sum's rounding of one) takes Math.round itself. No clamp: the scale is
// at least max / 127 rounded, so |x| <= 127 * (1 + 2^-51) and the code stays within ±127 (a clamp per weight
// cost a third of the time).

/** Rows [from, to) of f16 bits into `out`: two weights at a time where the rows are whole pairs (weight-values.ts bitPairs). */
function rowsFromF16Bits(bits: Uint16Array, k: number, out: Int8Rows, from: number, to: number): void {
  const table = f16Values();
  const pairs = k % 2 === 0 && out.q.byteOffset % 2 === 0 ? bitPairs(bits) : null;
  const codePairs = pairs ? new Int16Array(out.q.buffer, out.q.byteOffset, out.q.length >> 1) : null;
  for (let r = from; r < to; r++) {
    const base = r * k;
    const m = pairs ? maxMagnitudePairs(pairs, base >> 1, (base + k) >> 1) : maxMagnitudeBits(bits, base, base + k);
    const inv = setScale(out, r, m >= 0x7c00 ? NaN : table[m]); // 0x7c00 and up: infinities and NaNs
    if (inv === 0) out.q.fill(0, base, base + k);
    else if (pairs) codePairsFromF16Bits(pairs, table, inv, codePairs!, base >> 1, (base + k) >> 1);
    else codesFromF16Bits(bits, table, inv, out.q, base, base + k);
  }
}

/** Rows [from, to) of f32 values into `out`. */
function rowsFromValues(vals: Float32Array, k: number, out: Int8Rows, from: number, to: number): void {
  for (let r = from; r < to; r++) {
    const base = r * k;
    const inv = setScale(out, r, maxMagnitude(vals, base, base + k));
    if (inv === 0) out.q.fill(0, base, base + k);
    else codesFromValues(vals, inv, out.q, base, base + k);
  }
}

// The loops live in small functions of their own: V8 compiles them tighter than the same loops inlined in
// the row loop (measured: a third of the time).

function codesFromF16Bits(bits: Uint16Array, table: Float64Array, inv: number, q: Int8Array, from: number, to: number): void {
  for (let i = from; i < to; i++) {
    const x = table[bits[i]] * inv;
    const y = x + 0.5;
    const c = Math.floor(y);
    q[i] = c === y ? Math.round(x) : c;
  }
}

/** codesFromF16Bits two at a time: a u32 of two f16s in, an i16 of their two codes out (little-endian, as bitPairs). */
function codePairsFromF16Bits(pairs: Uint32Array, table: Float64Array, inv: number, codePairs: Int16Array, from2: number, to2: number): void {
  for (let j = from2; j < to2; j++) {
    const w = pairs[j];
    const x0 = table[w & 0xffff] * inv;
    const x1 = table[w >>> 16] * inv;
    const y0 = x0 + 0.5;
    const y1 = x1 + 0.5;
    let c0 = Math.floor(y0);
    let c1 = Math.floor(y1);
    if (c0 === y0) c0 = Math.round(x0);
    if (c1 === y1) c1 = Math.round(x1);
    codePairs[j] = (c0 & 0xff) | (c1 << 8);
  }
}

function codesFromValues(vals: Float32Array, inv: number, q: Int8Array, from: number, to: number): void {
  for (let i = from; i < to; i++) {
    const x = vals[i] * inv;
    const y = x + 0.5;
    const c = Math.floor(y);
    q[i] = c === y ? Math.round(x) : c;
  }
}

/** Stores row r's scale for its largest magnitude `max` and returns 1 / scale (0 for a row of zeros). */
function setScale(out: Int8Rows, r: number, max: number): number {
  if (!Number.isFinite(max)) throw new RangeError(`int8 quantiser: row ${r} holds a non-finite weight`);
  const sb = f16BitsAtLeast(max / 127);
  const scale = f16BitsToF32(sb);
  out.scaleBits[r] = sb;
  out.scales[r] = scale;
  return scale === 0 ? 0 : 1 / scale;
}

function quantizeRowRange(w: WeightValues, k: number, out: Int8Rows, from: number, to: number): void {
  if (w instanceof Uint16Array) rowsFromF16Bits(w, k, out, from, to);
  else rowsFromValues(w, k, out, from, to);
}

/** Quantises the rows of `w` ([n, k] row-major, f32 values or f16 bits). */
export function quantizeRowsInt8(w: WeightValues, n: number, k: number): Int8Rows {
  checkShape(w, n, k);
  const out = newRows(n, k);
  quantizeRowRange(w, k, out, 0, n);
  return out;
}

/**
 * quantizeRowsInt8, yielding to the event loop every WEIGHTS_PER_YIELD weights (a head of 65536 rows is seconds
 * of work at most, but never in one piece). `out` may be views into a larger buffer (the GPU group's codes).
 */
export async function quantizeRowsInt8Yielding(w: WeightValues, n: number, k: number, out: Int8Rows = newRows(n, k)): Promise<Int8Rows> {
  checkShape(w, n, k);
  if (out.q.length !== n * k || out.scaleBits.length !== n || out.scales.length !== n) throw new RangeError(`int8 quantiser: the output does not hold ${n} rows of ${k}`);
  const step = Math.max(1, Math.floor(WEIGHTS_PER_YIELD / Math.max(1, k)));
  for (let r = 0; r < n; r += step) {
    if (r > 0) await yieldToEventLoop();
    quantizeRowRange(w, k, out, r, Math.min(n, r + step));
  }
  return out;
}

/** w[r][i] as the kernels see it: q * scale. */
export function dequantizeRowsInt8(q: Int8Array, scales: Float32Array, k: number): Float32Array {
  const out = new Float32Array(q.length);
  for (let r = 0; r < scales.length; r++) for (let i = 0; i < k; i++) out[r * k + i] = q[r * k + i] * scales[r];
  return out;
}
