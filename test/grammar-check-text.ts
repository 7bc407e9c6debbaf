// Runs a text through a constraint the way decoding would: World-tokenized, each token checked
// against the mask before it is accepted, end of text checked against the mask at the end.
// Also asserts that mask and accept() agree on every token taken.

import * as assert from 'assert';
import type { CompiledConstraint } from '../engine/grammar';
import { worldTokenizer } from './grammar-vocab';

export function acceptsText(c: CompiledConstraint, text: string): boolean {
  const tok = worldTokenizer();
  const m = c.newMatcher();
  const mask = new Uint32Array(2048);
  for (const id of tok.encode(text)) {
    m.fillMask(mask);
    const allowed = (mask[id >>> 5] >>> (id & 31)) & 1;
    let threw = false;
    try {
      m.accept(id);
    } catch {
      threw = true;
    }
    assert.strictEqual(threw, !allowed, `mask and accept disagree on token ${id} in ${JSON.stringify(text)}`);
    if (threw) return false;
  }
  m.fillMask(mask);
  assert.strictEqual(mask[0] & 1, m.isAccepting() ? 1 : 0, 'end-of-text bit must equal isAccepting()');
  return m.isAccepting();
}
