// Encode held-out texts for one model's reduced vocabulary, so that two models with different
// vocabularies can be scored on the same text (train/compare_heldout.py compares them per byte).
//
//   node dist/train/corpus/encode-heldout.js --pieces DIR/valid.pieces.json --vocab-map MODEL.st|vocab_map.i32 --out FILE.u16
//
// Each piece is encoded with the restricted World tokenizer (as build-corpus.ts encodes the
// training text) and followed by row 0 (end of text), the layout of build-corpus.ts's valid.u16.
import * as fs from 'fs';
import * as path from 'path';
import { readSafetensors } from '../../engine/loader/safetensors';
import { describeModel } from '../../engine/model-spec';
import { WorldTokenizer } from '../../engine/tokenizer';
import { rowOfWorldId } from './reduced-vocab';

function readVocabMap(file: string): Int32Array {
  if (file.endsWith('.i32')) {
    const bytes = fs.readFileSync(file);
    return new Int32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  }
  const map = describeModel(readSafetensors(file)).vocabMap;
  if (!map) throw new Error(`${file}: the model has no vocab_map (not a reduced-vocabulary model)`);
  return Int32Array.from(map);
}

/** Rows of each piece, each followed by row 0. */
export function encodePieces(pieces: string[], vocabMap: Int32Array, world: WorldTokenizer): Uint16Array {
  if (vocabMap[0] !== 0) throw new Error('vocab_map row 0 must be World id 0 (end of text)');
  if (vocabMap.length > 65536) throw new RangeError(`${vocabMap.length} rows do not fit in u16`);
  const restricted = world.restrict(vocabMap.subarray(1));
  const rowOf = rowOfWorldId(vocabMap, world.vocabSize);
  const out: number[] = [];
  for (const piece of pieces) {
    for (const id of restricted.encode(piece)) out.push(rowOf[id]);
    out.push(0);
  }
  return Uint16Array.from(out);
}

function main(): void {
  const args = process.argv.slice(2);
  const opt = (name: string) => {
    const i = args.indexOf(name);
    if (i < 0 || i + 1 >= args.length) throw new Error(`${name} is required`);
    return path.resolve(args[i + 1]);
  };
  const pieces = JSON.parse(fs.readFileSync(opt('--pieces'), 'utf8')) as unknown;
  if (!Array.isArray(pieces) || pieces.some((p) => typeof p !== 'string')) throw new Error('--pieces must be a JSON array of strings');
  const rows = encodePieces(pieces as string[], readVocabMap(opt('--vocab-map')), WorldTokenizer.bundled());
  fs.writeFileSync(opt('--out'), new Uint8Array(rows.buffer));
  const bytes = (pieces as string[]).reduce((n, p) => n + Buffer.byteLength(p), 0);
  console.log(`${pieces.length} pieces, ${bytes} bytes → ${rows.length} tokens (${opt('--out')})`);
}

if (require.main === module) main();
