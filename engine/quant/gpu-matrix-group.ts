// The GPU layout of a matrix group (rwkv7/weights.ts MatrixGroup) in a quantised format, as the includes
// shaders/weights_i8.wgsl and weights_nf4.wgsl read it: one u32 buffer holding the codes of every matrix of the
// group, back to back (a matrix's rows at its segment's wOff, in units of 8 elements), then the f16 scales
// packed two a word from word `scaleWord` (the group uniform carries it to the kernels).
//   int8: 4 codes a word; one scale per output row, indexed by the row's virtual row (its segment's 64-aligned
//         start + the row, matmul.ts groupUniform), so a kernel finds it from the segment it already has.
//   nf4:  8 codes a word; the group's weights as one flat array of 64-weight blocks (nf4-blocks.ts), one absmax
//         per block, found from the weight's position alone.

import { f16ToF32 } from '../loader/dtype';
import { quantizeRowsInt8Yielding } from './int8-rows';
import { NF4_BLOCK, quantizeNf4Yielding } from './nf4-blocks';
import { yieldToEventLoop, type WeightValues } from './weight-values';

export type QuantizedFormat = 'int8' | 'nf4';

/** One matrix of a group, [n, k] row-major: f32 values, or f16 bit patterns (weight-values.ts). */
export interface GroupMatrix {
  name: string;
  data: WeightValues;
  n: number;
  k: number;
}

export interface PackedGroup {
  words: Uint32Array;
  /** Word where the scales start (even, so a vec2<u32> view finds it too). */
  scaleWord: number;
  /** Bytes of the model's codes and scales (without the alignment padding). */
  modelBytes: number;
}

/** Packs f16 bit patterns two a word into `words` from `at`. */
function putHalves(words: Uint32Array, at: number, halves: Uint16Array, firstIndex = 0): void {
  for (let i = 0; i < halves.length; i++) {
    const j = firstIndex + i;
    words[at + (j >> 1)] |= halves[i] << (16 * (j & 1));
  }
}

/** The group's weights as one flat array for nf4: f16 bits when every matrix is, else f32 values. */
function flatWeights(mats: GroupMatrix[], elements: number): WeightValues {
  if (mats.length === 1) return mats[0].data;
  const allBits = mats.every((m) => m.data instanceof Uint16Array);
  const flat = allBits ? new Uint16Array(elements) : new Float32Array(elements);
  let off = 0;
  for (const m of mats) {
    if (flat instanceof Float32Array && m.data instanceof Uint16Array) f16ToF32(m.data, flat.subarray(off, off + m.data.length));
    else flat.set(m.data, off);
    off += m.data.length;
  }
  return flat;
}

/**
 * Quantises and lays out a group, quantising each matrix straight into the group's words and yielding to the
 * event loop between matrices and within large ones (a model's load is hundreds of these).
 */
export async function packQuantizedGroup(mats: GroupMatrix[], format: QuantizedFormat, segmentAlign: number): Promise<PackedGroup> {
  let elements = 0;
  for (const m of mats) {
    if (m.k % 32 !== 0) throw new Error(`${m.name}: input width ${m.k} is not a multiple of 32`);
    if (!(m.data instanceof Float32Array || m.data instanceof Uint16Array)) throw new Error(`${m.name}: quantising needs f32 values or f16 bits`);
    if (m.data.length !== m.n * m.k) throw new Error(`${m.name}: ${m.data.length} values are not ${m.n} rows of ${m.k}`);
    elements += m.n * m.k;
  }
  if (format === 'int8') {
    const codeWords = elements / 4; // even: k is a multiple of 32
    const last = mats[mats.length - 1];
    let rows = 0;
    const rowStarts = mats.map((m) => {
      const start = rows;
      rows += Math.ceil(m.n / segmentAlign) * segmentAlign;
      return start;
    });
    const virtualRows = rowStarts[rowStarts.length - 1] + last.n;
    const words = new Uint32Array(codeWords + Math.ceil(virtualRows / 2));
    let off = 0;
    let realRows = 0;
    for (const [s, m] of mats.entries()) {
      if (s > 0) await yieldToEventLoop();
      const q = new Int8Array(words.buffer, off, m.n * m.k);
      const { scaleBits } = await quantizeRowsInt8Yielding(m.data, m.n, m.k, { q, scaleBits: new Uint16Array(m.n), scales: new Float32Array(m.n) });
      putHalves(words, codeWords, scaleBits, rowStarts[s]);
      off += q.length;
      realRows += m.n;
    }
    return { words, scaleWord: codeWords, modelBytes: elements + 2 * realRows };
  }
  const codeWords = Math.ceil(elements / 8);
  const scaleWord = codeWords + (codeWords & 1);
  const blocks = Math.ceil(elements / NF4_BLOCK);
  const words = new Uint32Array(scaleWord + Math.ceil(blocks / 2));
  const { absmaxBits } = await quantizeNf4Yielding(flatWeights(mats, elements), { words: words.subarray(0, codeWords), absmaxBits: new Uint16Array(blocks) });
  putHalves(words, scaleWord, absmaxBits);
  return { words, scaleWord, modelBytes: elements / 2 + 2 * blocks };
}
