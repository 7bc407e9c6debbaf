// The GPU layout of a matrix group (rwkv7/weights.ts MatrixGroup) in a quantised format, as the includes
// shaders/weights_i8.wgsl and weights_nf4.wgsl read it: one u32 buffer holding the codes of every matrix of the
// group, back to back (a matrix's rows at its segment's wOff, in units of 8 elements), then the f16 scales
// packed two a word from word `scaleWord` (the group uniform carries it to the kernels).
//   int8: 4 codes a word; one scale per output row, indexed by the row's virtual row (its segment's 64-aligned
//         start + the row, matmul.ts groupUniform), so a kernel finds it from the segment it already has.
//   nf4:  8 codes a word; the group's weights as one flat array of 64-weight blocks (nf4-blocks.ts), one absmax
//         per block, found from the weight's position alone.

import { quantizeRowsInt8 } from './int8-rows';
import { quantizeNf4 } from './nf4-blocks';

export type QuantizedFormat = 'int8' | 'nf4';

/** One matrix of a group, [n, k] row-major, as f32 values (checked: a caller's union type may hold f16 bits). */
export interface GroupMatrix {
  name: string;
  data: Float32Array | Uint16Array;
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

export function packQuantizedGroup(mats: GroupMatrix[], format: QuantizedFormat, segmentAlign: number): PackedGroup {
  let elements = 0;
  for (const m of mats) {
    if (m.k % 32 !== 0) throw new Error(`${m.name}: input width ${m.k} is not a multiple of 32`);
    if (!(m.data instanceof Float32Array)) throw new Error(`${m.name}: quantising needs f32 values, got f16 bits`);
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
    const bytes = new Int8Array(words.buffer, 0, elements);
    let off = 0;
    let realRows = 0;
    mats.forEach((m, s) => {
      const { q, scaleBits } = quantizeRowsInt8(m.data as Float32Array, m.n, m.k);
      bytes.set(q, off);
      off += q.length;
      putHalves(words, codeWords, scaleBits, rowStarts[s]);
      realRows += m.n;
    });
    return { words, scaleWord: codeWords, modelBytes: elements + 2 * realRows };
  }
  const flat = new Float32Array(elements);
  let off = 0;
  for (const m of mats) {
    flat.set(m.data as Float32Array, off);
    off += m.data.length;
  }
  const { words: codes, absmaxBits } = quantizeNf4(flat);
  const scaleWord = codes.length + (codes.length & 1);
  const words = new Uint32Array(scaleWord + Math.ceil(absmaxBits.length / 2));
  words.set(codes);
  putHalves(words, scaleWord, absmaxBits);
  return { words, scaleWord, modelBytes: elements / 2 + 2 * absmaxBits.length };
}
