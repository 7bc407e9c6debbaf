// Model rows vs World token ids. Reduced-vocabulary models carry a vocab_map (row → World id);
// the engine samples rows and tokenizes/decodes World ids, so every boundary maps through here.
// Without a map, row i is World id i.

import type { ModelInfo } from './types';

export class VocabMapping {
  readonly rows: number;
  private readonly toWorld: Int32Array | null;
  private readonly toRow: Map<number, number> | null;

  constructor(info: Pick<ModelInfo, 'vocabSize' | 'vocabMap'>) {
    this.rows = info.vocabSize;
    if (info.vocabMap) {
      if (info.vocabMap.length !== info.vocabSize) {
        throw new Error(`vocab_map has ${info.vocabMap.length} entries for ${info.vocabSize} model rows`);
      }
      this.toWorld = info.vocabMap;
      this.toRow = new Map();
      info.vocabMap.forEach((id, row) => this.toRow!.set(id, row));
    } else {
      this.toWorld = null;
      this.toRow = null;
    }
  }

  get reduced(): boolean {
    return this.toWorld !== null;
  }

  /** World ids the model can produce (for restricting the tokenizer), or null for all. */
  worldIds(): Int32Array | null {
    return this.toWorld;
  }

  /** -1 when the model has no row for the id. */
  worldToRow(id: number): number {
    if (this.toRow) return this.toRow.get(id) ?? -1;
    return Number.isInteger(id) && id >= 0 && id < this.rows ? id : -1;
  }

  rowToWorld(row: number): number {
    return this.toWorld ? this.toWorld[row] : row;
  }

  /** A bitset over World ids (bit id % 32 of word id >> 5) as one over model rows (ceil(rows / 32) words, bits past the last row clear). */
  rowBitsFromWorldBitset(bits: Uint32Array, out: Uint32Array): Uint32Array {
    if (out.length !== Math.ceil(this.rows / 32)) throw new RangeError(`a bitset over ${this.rows} rows has ${Math.ceil(this.rows / 32)} words, not ${out.length}`);
    if (this.toWorld) {
      out.fill(0);
      for (let row = 0; row < this.rows; row++) {
        const id = this.toWorld[row];
        if ((bits[id >>> 5] >>> (id & 31)) & 1) out[row >>> 5] |= 1 << (row & 31);
      }
    } else {
      out.set(bits.subarray(0, out.length));
      if (this.rows % 32) out[out.length - 1] &= (1 << this.rows % 32) - 1;
    }
    return out;
  }
}
