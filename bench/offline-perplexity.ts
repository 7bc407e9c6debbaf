// Perplexity of the bundled model without a network: mean NLL of every next token over 512-token windows from the
// zero state, on text it was not trained on (this machine's /usr/share/doc/*/copyright files). The held-out split
// of bench/precision.ts needs a network to rebuild; the CPU error benches (cpu-i16-error, cpu-int8-error) use this.

import * as fs from 'fs';
import * as path from 'path';
import type { Backend } from '../engine/backend';
import { readSafetensors } from '../engine/loader/safetensors';
import { describeModel } from '../engine/model-spec';
import { WorldTokenizer } from '../engine/tokenizer';
import { encodePieces } from '../train/corpus/encode-heldout';

/** The copyright files' text as the bundled model's token rows, and how many files it came from. */
export function copyrightText(bundled: string): { rows: Uint16Array; files: number } {
  const docs = fs.readdirSync('/usr/share/doc').sort().map((d) => path.join('/usr/share/doc', d, 'copyright')).filter((f) => fs.existsSync(f));
  const map = describeModel(readSafetensors(bundled)).vocabMap!;
  return { rows: encodePieces(docs.map((f) => fs.readFileSync(f, 'utf8')), Int32Array.from(map), WorldTokenizer.bundled()), files: docs.length };
}

/** Mean NLL per predicted token over `windows` windows of 513 tokens spread over `rows`. */
export async function windowNll(be: Backend, rows: Uint16Array, windows: number): Promise<number> {
  const V = be.info.vocabSize;
  let total = 0;
  let count = 0;
  for (let w = 0; w < windows; w++) {
    const start = Math.floor((w * (rows.length - 513)) / Math.max(1, windows - 1));
    be.resetState(0);
    const [out] = await be.run([{ slot: 0, tokens: Array.from(rows.subarray(start, start + 512)), output: 'all' }]);
    for (let t = 0; t < 512; t++) {
      const row = out!.subarray(t * V, (t + 1) * V);
      let m = -Infinity;
      for (const v of row) m = Math.max(m, v);
      let z = 0;
      for (const v of row) z += Math.exp(v - m);
      total += m + Math.log(z) - row[rows[start + t + 1]];
      count++;
    }
  }
  return total / count;
}
