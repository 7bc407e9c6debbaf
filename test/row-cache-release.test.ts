// RWKV-7b's cached rows follow the live contexts: after a long context, resetting its slot (or writing or copying
// a shorter state over it) gives the row memory back, on the GPU (every slot's rows share one buffer a layer,
// sized by the longest slot) and on the CPU (GrowingRows, one buffer a slot); the other slots keep their rows.

import { strict as assert } from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { GrowingRows } from '../engine/cpu/growing-rows';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import { worstRelL2 } from './metrics';

const MODEL = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, variant: 'v7b', dtype: 'f32', seed: 7 });
const tokens = (n: number, from = 1) => Array.from({ length: n }, (_, i) => (from + i * 7) % 300);

/** Row-cache bytes the GPU runtime holds (all layers, all slots, the copy scratch). */
const held = (be: Backend) => (be as unknown as Rwkv7Runtime).rowCacheBytes();

describe('[gpu] RWKV-7b row caches shrink when their long context goes', function () {
  this.timeout(600_000);
  let be: Backend;
  let perRow: number;
  before(async () => {
    be = await createBackend({ model: MODEL, slots: 3, precision: 'f32', device: 'gpu', maxContext: 1024 });
    perRow = be.stateRowFloats! * 4;
  });
  after(() => be?.dispose());

  it('reset, a shorter state written, or a shorter slot copied over the long one: the bytes go back down; the short slot keeps its rows', async () => {
    await be.run([{ slot: 1, tokens: tokens(20, 3), output: 'none' }]);
    const short = await be.readState(1);
    const small = held(be);
    for (const [what, release] of [
      ['resetState', () => be.resetState(0)],
      ['writeState of a 20-row state', () => be.writeState(0, short)],
      ['copyState from the 20-row slot', () => be.copyState(1, 0)],
    ] as const) {
      await be.run([{ slot: 0, tokens: tokens(600), output: 'none' }]);
      const grown = held(be);
      assert.ok(grown >= 3 * 600 * perRow, `${what}: ${grown} bytes held with a 600-token context in 3 slots`);
      release();
      // The shrink runs once the calls before it ran: a state read queued after it has seen it.
      assert.deepEqual(await be.readState(1), short, `${what}: slot 1's rows survive the shrink`);
      const after = held(be);
      assert.ok(after <= small, `${what}: ${after} bytes held after the long context went, ${small} before it came (${grown} with it)`);
    }
  });

  it('a slot continued after the shrink gives the logits it gave before it', async () => {
    await be.run([{ slot: 0, tokens: tokens(600), output: 'none' }]);
    const state = await be.readState(1);
    const [before] = await be.run([{ slot: 1, tokens: [5, 9], output: 'last' }]);
    be.writeState(1, state);
    be.resetState(0);
    const [afterShrink] = await be.run([{ slot: 1, tokens: [5, 9], output: 'last' }]);
    const d = worstRelL2(afterShrink!, before!, before!.length);
    assert.ok(d < 1e-4, `relative difference ${d}`);
  });
});

describe('GrowingRows (CPU): a slot written with fewer rows gives back a large buffer', () => {
  it('write and copy of a short state over a long one shrink the buffer to the rows it needs (doubling rule)', () => {
    const rowFloats = 1024;
    const g = new GrowingRows(2, rowFloats, 4096);
    g.write(0, new Float32Array(4000 * rowFloats));
    g.write(1, new Float32Array(10 * rowFloats).fill(2));
    assert.ok(g.buffer(0).length >= 4000 * rowFloats);
    g.write(0, new Float32Array(3 * rowFloats).fill(1));
    assert.ok(g.buffer(0).length <= 16 * rowFloats, `${g.buffer(0).length} floats kept for 3 rows`);
    assert.deepEqual(Array.from(g.read(0)), new Array(3 * rowFloats).fill(1));
    g.write(0, new Float32Array(4000 * rowFloats));
    g.copy(1, 0);
    assert.ok(g.buffer(0).length <= 20 * rowFloats, `${g.buffer(0).length} floats kept for 10 copied rows`);
    assert.deepEqual(g.read(0), g.read(1));
  });
});
