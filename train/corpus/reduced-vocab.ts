// The reduced vocabulary of the default model: World token 0 (end of text), all 256 single-byte
// tokens (so any text stays encodable), and the most frequent other World tokens of the training
// text. Row i of the model is World token vocabMap[i]; the rows are in ascending World id order.
import type { WorldTokenizer } from '../../engine/tokenizer';

/** World ids of the 256 single-byte tokens. */
export function singleByteIds(world: WorldTokenizer): number[] {
  const ids: number[] = [];
  for (let id = 1; id < world.vocabSize; id++) {
    const bytes = world.tokenBytes(id);
    if (bytes && bytes.length === 1) ids.push(id);
  }
  if (ids.length !== 256) throw new Error(`expected 256 single-byte tokens in the World vocabulary, found ${ids.length}`);
  return ids;
}

/**
 * Pick `rows` World ids: 0, the single-byte tokens, then the others by descending count (ties by
 * id). `counts[id]` is how often the full tokenizer emitted id over the training split.
 */
export function selectReducedVocab(world: WorldTokenizer, counts: Float64Array, rows: number): Int32Array {
  const bytes = singleByteIds(world);
  if (rows < bytes.length + 2) throw new RangeError(`reduced vocabulary needs more than ${bytes.length + 1} rows, got ${rows}`);
  const chosen = new Set<number>([0, ...bytes]);
  const others: number[] = [];
  for (let id = 1; id < counts.length; id++) if (!chosen.has(id) && counts[id] > 0) others.push(id);
  others.sort((a, b) => counts[b] - counts[a] || a - b);
  for (const id of others.slice(0, rows - chosen.size)) chosen.add(id);
  return Int32Array.from([...chosen].sort((a, b) => a - b));
}

/** World id → model row, -1 where the World token has no row. */
export function rowOfWorldId(vocabMap: Int32Array, worldVocabSize: number): Int32Array {
  const rows = new Int32Array(worldVocabSize).fill(-1);
  vocabMap.forEach((id, row) => {
    rows[id] = row;
  });
  return rows;
}
