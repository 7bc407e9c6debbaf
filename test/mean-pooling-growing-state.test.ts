// Mean pooling reads the slot's state after every token but looks only at one layer's ffn_x, in the fixed part.
// With a growing state (RWKV-7b) a whole read copies every cached row, so n tokens copied O(n²) rows (about 400 GB
// for 4096 tokens of a 0.1B-shaped 7b) through the event loop: the reads must take the fixed part only.

import { strict as assert } from 'assert';
import * as path from 'path';
import { RwkvEngine } from '../engine/engine';
import { createBackend } from '../engine/backend';
import { byteTokenizer } from './fake-backend';
import { GrowingFakeBackend } from './growing-fake-backend';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

describe('mean pooling over a growing state reads the fixed part only', function () {
  this.timeout(120_000);

  it('engine: each per-token read of a mean-pooled embed is the fixed part; a last-token embed still reads the rows', async () => {
    const backend = new GrowingFakeBackend({ slots: 1 }, 64);
    const engine = new RwkvEngine({ backend, tokenizer: byteTokenizer, config: {}, compileConstraint: null });
    try {
      const mean = await engine.embed('a text of some tokens', { pooling: 'mean' });
      assert.equal(mean.length, 4);
      assert.ok(backend.reads.length >= 20);
      assert.deepEqual(backend.reads, backend.reads.map(() => backend.stateSize), `reads of ${backend.reads.join(', ')} floats`);
      backend.reads.length = 0;
      // The same vector part either way: the mean of one token is that token's state.
      const one = await engine.embed('a', { pooling: 'last' });
      assert.equal(one.length, 4);
    } finally {
      await engine.close();
    }
  });

  it('CPU backend (v7b-tiny): readState(slot, { fixedOnly }) gives the fixed part, equal to a whole read\'s', async function () {
    const model = path.join(GOLDEN, 'v7b-tiny.pth');
    requireGolden(this, model);
    const be = await createBackend({ model, slots: 1, device: 'cpu', threads: 1, maxContext: 32 });
    try {
      await be.run([{ slot: 0, tokens: [1, 2, 3, 4, 5], output: 'none' }]);
      const whole = await be.readState(0);
      const fixed = await be.readState(0, { fixedOnly: true });
      assert.equal(whole.length, be.stateSize + 5 * be.stateRowFloats!);
      assert.equal(fixed.length, be.stateSize);
      assert.deepEqual(fixed, whole.subarray(0, be.stateSize));
    } finally {
      be.dispose();
    }
  });
});
