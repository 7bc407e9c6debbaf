// NF4 quantisation (precision 'nf4', the 4-bit NormalFloat of QLoRA as web-rwkv uses it): the weights, taken
// as one flat array, in blocks of 64; each block keeps absmax = the smallest f16 >= max|w| of the block
// (f16-scale.ts) and each weight the index (0..15) of the code nearest to w / absmax. The codes are the NF4
// code book: quantiles of a standard normal scaled to [-1, 1], with an exact 0. Two codes a byte, eight a u32
// word, element e in bits 4·(e mod 8) of word e / 8 (the GPU include weights_nf4.wgsl reads them so).

import { f16BitsToF32 } from '../loader/dtype';
import { f16BitsAtLeast } from './f16-scale';
import { bitPairs, f16Values, maxMagnitude, maxMagnitudeBits, maxMagnitudePairs, WEIGHTS_PER_YIELD, yieldToEventLoop, type WeightValues } from './weight-values';

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

// The nearest code of v is the number of midpoints below it (ties go to the lower code). Instead of searching
// the 15 midpoints, v's cell in a grid of CELLS over [-1, 1] gives the midpoints wholly below the cell
// (CELL_BASE) and the one midpoint, if any, inside it (CELL_MID; the cells are narrower than any gap between
// midpoints): one lookup and one comparison per weight. Each cell is widened by SLACK on both sides so the
// rounding of the cell index cannot put v in a cell that misjudges it; the end cells reach to infinity.
const CELLS = 512;
const SLACK = 1e-9;
const CELL_BASE = new Uint8Array(CELLS + 1);
const CELL_MID = new Float64Array(CELLS + 1);
for (let c = 0; c <= CELLS; c++) {
  const lo = c === 0 ? -Infinity : -1 + (2 * c) / CELLS - SLACK;
  const hi = c === CELLS ? Infinity : -1 + (2 * (c + 1)) / CELLS + SLACK;
  CELL_BASE[c] = MID.filter((m) => m < lo).length;
  const inside = MID.filter((m) => m >= lo && m <= hi);
  if (inside.length > 1) throw new Error(`internal: nf4 code cell ${c} holds ${inside.length} midpoints`);
  CELL_MID[c] = inside.length ? inside[0] : Infinity;
}
/**
 * The midpoints times CELLS / 2 (a power of two: exact), for the whole-block loops, which scale 1 / absmax by
 * it once per block: then v·CELLS/2 is one product per weight, its cell index one addition away, and every
 * comparison is the unscaled one's exactly.
 */
const CELL_MID_SCALED = CELL_MID.map((m) => m * (CELLS / 2));

/** Index of the code nearest to v (v in [-1, 1] up to rounding; ties to the lower code). */
function nearestCode(v: number): number {
  let c = ((v + 1) * (CELLS / 2)) | 0;
  c = c < 0 ? 0 : c > CELLS ? CELLS : c;
  return v > CELL_MID[c] ? CELL_BASE[c] + 1 : CELL_BASE[c];
}

export interface Nf4Blocks {
  /** ceil(length / 8) words, 8 codes each; codes past the end are 7 (the code 0). */
  words: Uint32Array;
  /** One absmax per block (ceil(length / 64)), f16 bit patterns. */
  absmaxBits: Uint16Array;
}

const nonFinite = (b: number) => new RangeError(`nf4 quantiser: block ${b} holds a non-finite weight`);

/**
 * Blocks [b0, b1) of f16 bits into `out`. A block's absmax is the bit pattern of its largest magnitude: an f16
 * value is its own smallest f16 at or above it, so no rounding up is needed.
 */
function blocksFromF16Bits(bits: Uint16Array, out: Nf4Blocks, b0: number, b1: number): void {
  const table = f16Values();
  const pairs = bitPairs(bits); // two weights a load (weight-values.ts); a block starts at an even weight
  for (let b = b0; b < b1; b++) {
    const from = b * NF4_BLOCK;
    const to = Math.min(bits.length, from + NF4_BLOCK);
    const whole = to - from === NF4_BLOCK;
    const m = pairs && whole ? maxMagnitudePairs(pairs, from >> 1, to >> 1) : maxMagnitudeBits(bits, from, to);
    if (m >= 0x7c00) throw nonFinite(b); // infinities and NaNs
    out.absmaxBits[b] = m;
    const inv = m === 0 ? 0 : 1 / table[m];
    if (!whole) lastWords(bits, inv, out.words, from, to);
    else if (pairs) wordsFromF16Pairs(pairs, table, inv * (CELLS / 2), out.words, from);
    else wordsFromF16Bits(bits, table, inv, out.words, from);
  }
}

/** Blocks [b0, b1) of f32 values into `out`. */
function blocksFromValues(vals: Float32Array, out: Nf4Blocks, b0: number, b1: number): void {
  for (let b = b0; b < b1; b++) {
    const from = b * NF4_BLOCK;
    const to = Math.min(vals.length, from + NF4_BLOCK);
    const max = maxMagnitude(vals, from, to);
    if (!Number.isFinite(max)) throw nonFinite(b);
    const sb = f16BitsAtLeast(max);
    out.absmaxBits[b] = sb;
    const inv = max === 0 ? 0 : 1 / f16BitsToF32(sb);
    if (to - from === NF4_BLOCK) wordsFromValues(vals, inv, out.words, from);
    else lastWords(vals, inv, out.words, from, to);
  }
}

// The code loops of a whole block, in functions of their own (V8 compiles them tighter so), with the cell
// lookup of nearestCode written out and without its clamp: |w| <= absmax, so |v| <= 1 + 2^-52 and the cell
// index is 0..CELLS.

function wordsFromF16Bits(bits: Uint16Array, table: Float64Array, inv: number, words: Uint32Array, from: number): void {
  for (let e = from; e < from + NF4_BLOCK; e += 8) {
    let word = 0;
    for (let j = 0; j < 8; j++) {
      const v = table[bits[e + j]] * inv;
      const c = ((v + 1) * (CELLS / 2)) | 0;
      word |= (v > CELL_MID[c] ? CELL_BASE[c] + 1 : CELL_BASE[c]) << (4 * j);
    }
    words[e >> 3] = word;
  }
}

/** wordsFromF16Bits over bitPairs, with 1 / absmax scaled by CELLS / 2 (CELL_MID_SCALED). */
function wordsFromF16Pairs(pairs: Uint32Array, table: Float64Array, invScaled: number, words: Uint32Array, from: number): void {
  for (let e = from; e < from + NF4_BLOCK; e += 8) {
    let word = 0;
    for (let j = 0; j < 4; j++) {
      const w = pairs[(e >> 1) + j];
      const v0 = table[w & 0xffff] * invScaled;
      const v1 = table[w >>> 16] * invScaled;
      const c0 = (v0 + CELLS / 2) | 0;
      const c1 = (v1 + CELLS / 2) | 0;
      word |= ((v0 > CELL_MID_SCALED[c0] ? CELL_BASE[c0] + 1 : CELL_BASE[c0]) << (8 * j)) | ((v1 > CELL_MID_SCALED[c1] ? CELL_BASE[c1] + 1 : CELL_BASE[c1]) << (8 * j + 4));
    }
    words[e >> 3] = word;
  }
}

function wordsFromValues(vals: Float32Array, inv: number, words: Uint32Array, from: number): void {
  for (let e = from; e < from + NF4_BLOCK; e += 8) {
    let word = 0;
    for (let j = 0; j < 8; j++) {
      const v = vals[e + j] * inv;
      const c = ((v + 1) * (CELLS / 2)) | 0;
      word |= (v > CELL_MID[c] ? CELL_BASE[c] + 1 : CELL_BASE[c]) << (4 * j);
    }
    words[e >> 3] = word;
  }
}

/** The words of a last, partial block [from, to): codes past the end are 7 (the code 0). */
function lastWords(w: WeightValues, inv: number, words: Uint32Array, from: number, to: number): void {
  const table = f16Values();
  for (let e = from; e < to; e += 8) {
    let word = 0;
    for (let j = 0; j < 8; j++) {
      const i = e + j;
      word |= (i < to ? nearestCode((w instanceof Uint16Array ? table[w[i]] : w[i]) * inv) : 7) << (4 * j);
    }
    words[e >> 3] = word;
  }
}

/** Blocks [b0, b1) of `w` into `out` (which holds every block of w). */
function quantizeBlockRange(w: WeightValues, out: Nf4Blocks, b0: number, b1: number): void {
  if (w instanceof Uint16Array) blocksFromF16Bits(w, out, b0, b1);
  else blocksFromValues(w, out, b0, b1);
}

function newBlocks(length: number): Nf4Blocks {
  return { words: new Uint32Array(Math.ceil(length / 8)), absmaxBits: new Uint16Array(Math.ceil(length / NF4_BLOCK)) };
}

/** Quantises `w` (any length; f32 values or f16 bits) as one flat array of 64-weight blocks. */
export function quantizeNf4(w: WeightValues): Nf4Blocks {
  const out = newBlocks(w.length);
  quantizeBlockRange(w, out, 0, out.absmaxBits.length);
  return out;
}

/**
 * quantizeNf4, yielding to the event loop every WEIGHTS_PER_YIELD weights. `out` may be views into a larger
 * buffer (the GPU group's words: codes, then absmaxes).
 */
export async function quantizeNf4Yielding(w: WeightValues, out: Nf4Blocks = newBlocks(w.length)): Promise<Nf4Blocks> {
  const blocks = Math.ceil(w.length / NF4_BLOCK);
  if (out.words.length !== Math.ceil(w.length / 8) || out.absmaxBits.length !== blocks) throw new RangeError(`nf4 quantiser: the output does not hold ${w.length} weights`);
  const step = WEIGHTS_PER_YIELD / NF4_BLOCK;
  for (let b = 0; b < blocks; b += step) {
    if (b > 0) await yieldToEventLoop();
    quantizeBlockRange(w, out, b, Math.min(blocks, b + step));
  }
  return out;
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
