// A step's commands encoded while the GPU runs the step before (engine/gpu/encoded-ahead.ts): the holder's rules, and
// on the GPU that a runtime submitting commands encoded ahead gives the bits of one encoding every call itself, through
// state writes, resets and copies between steps, a prefill in the middle of a decode loop, a changed setting and
// RWKV-7b's growing rows (which replace buffers the held commands name); and the same for RWKV-4/5/6's runtime.

import * as assert from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { EncodedAhead } from '../engine/gpu/encoded-ahead';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import type { JobResult, SlotJob } from '../engine/types';
import type { EncodedAhead as Holder } from '../engine/gpu/encoded-ahead';
import { gpuBackends } from './gpu-backends';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';
import * as path from 'path';

describe('commands encoded ahead', function () {
  this.timeout(300000);

  describe('the holder', () => {
    const buffers = (n: number) => Array.from({ length: n }, (_, i) => ({ i }) as unknown as GPUCommandBuffer);

    it('encodes only after the same ops ran twice in a row, and hands the buffers out once', () => {
      const a = {};
      const b = {};
      const ahead = new EncodedAhead<object>();
      let encoded = 0;
      const encode = () => (encoded++, buffers(3));
      ahead.afterCall(a, encode);
      assert.strictEqual(encoded, 0, 'a shape seen once is not encoded ahead');
      assert.strictEqual(ahead.take(a), null);
      ahead.afterCall(a, encode);
      assert.strictEqual(encoded, 1);
      assert.strictEqual(ahead.take(a)!.length, 3);
      assert.strictEqual(ahead.take(a), null, 'handed out once');
      ahead.afterCall(a, encode);
      assert.strictEqual(ahead.take(b), null, 'other ops do not get them');
      assert.strictEqual(ahead.take(a), null, 'and they are dropped');
      ahead.afterCall(b, encode);
      assert.strictEqual(encoded, 2, 'a new shape waits for its second call');
      ahead.afterCall(b, encode);
      ahead.clear();
      assert.strictEqual(ahead.take(b), null);
      assert.strictEqual(ahead.hits, 1);
    });
  });

  describe('on the GPU', () => {
    const fixture = gpuBackends();

    async function pair(variant: 'v7' | 'v7b') {
      const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, dtype: 'f32', seed: 11, variant });
      const make = async () => {
        const be = fixture.open(await createBackend({ model: ck, slots: 4, precision: 'f16', gpu: fixture.gpu, device: 'gpu', maxContext: 256 }));
        return be as unknown as Rwkv7Runtime & Runtime;
      };
      return { ahead: await make(), plain: await make() };
    }

    type Runtime = Backend & { ahead: Holder<object> };

    /** The same calls on both runtimes; `plain` never keeps commands encoded ahead. Results compared bit for bit. */
    async function both(rts: { ahead: Runtime; plain: Runtime }, jobs: SlotJob[], what: string) {
      rts.plain.ahead.clear();
      const [x, y] = await Promise.all([rts.ahead.run(jobs), rts.plain.run(jobs)]);
      rts.plain.ahead.clear();
      const flat = (r: JobResult[]) =>
        r.map((v) => (v === null ? null : v instanceof Float32Array ? Array.from(v) : { rows: Array.from(v.rows), logits: Array.from(v.logits) }));
      assert.deepStrictEqual(flat(x), flat(y), what);
    }

    const decode = (step: number, slots = [0, 1, 2], output: 'last' | 'top' = 'top'): SlotJob[] =>
      slots.map((slot) => ({ slot, tokens: [(step * 37 + slot * 11) % 300], output }));

    it('a decode loop submits commands encoded during the call before, with the bits of encoding each call', async () => {
      const rts = await pair('v7');
      for (let s = 0; s < 6; s++) await both(rts, decode(s), `decode step ${s}`);
      assert.strictEqual(rts.ahead.ahead.hits, 4, 'steps 3..6 ran commands encoded ahead');
      assert.strictEqual(rts.plain.ahead.hits, 0);

      // State changes between steps reach commands encoded before them (the queue orders the writes first).
      const snap = await rts.ahead.readState(1);
      for (const rt of [rts.ahead, rts.plain]) {
        rt.writeState(2, snap);
        rt.resetState(0);
        rt.copyState(2, 3);
      }
      await both(rts, decode(6), 'after a state write, a reset and a copy');
      await both(rts, decode(7, [0, 1, 3], 'last'), 'other slots, full rows');
      await both(rts, [{ slot: 3, tokens: Array.from({ length: 40 }, (_, i) => (i * 7) % 300), output: 'last' }], 'a prefill in between');
      for (let s = 8; s < 12; s++) await both(rts, decode(s, [0, 1, 3], 'last'), `decode again, step ${s}`);
      const hits = rts.ahead.ahead.hits;
      assert.ok(hits >= 6, `${hits} calls ran commands encoded ahead`);

      // A changed setting records new commands: what was held for the old ones is not submitted.
      rts.ahead.vecMaxRows = rts.plain.vecMaxRows = 0;
      for (let s = 12; s < 15; s++) await both(rts, decode(s, [0, 1, 3], 'last'), `tiled products, step ${s}`);
      assert.strictEqual(rts.ahead.ahead.hits, hits + 1);
    });

    it('RWKV-7b: rows that outgrow their buffers while commands are held re-record, and the results stay exact', async () => {
      const rts = await pair('v7b');
      // Slot 0 grows a token a step; its buffers are replaced whenever it passes their capacity.
      for (let s = 0; s < 40; s++) await both(rts, decode(s, [0, 1]), `decode step ${s}`);
      await both(rts, [{ slot: 2, tokens: Array.from({ length: 100 }, (_, i) => (i * 13) % 300), output: 'top' }], 'a long prefill grows every slot\'s rows');
      for (let s = 40; s < 44; s++) await both(rts, decode(s, [0, 1, 2]), `decode step ${s}`);
      assert.ok(rts.ahead.ahead.hits >= 30, `${rts.ahead.ahead.hits} calls ran commands encoded ahead`);
    });

    for (const name of ['v6-tiny', 'v4-tiny']) {
      it(`${name} (RWKV-4/5/6 runtime): a decode loop with a prefill and a state write between gives the same bits`, async function () {
        const model = path.join(GOLDEN, `${name}.pth`);
        requireGolden(this, model);
        const make = async () => {
          const be = fixture.open(await createBackend({ model, slots: 4, precision: 'f32', gpu: fixture.gpu, device: 'gpu' }));
          return be as unknown as Runtime;
        };
        const rts = { ahead: await make(), plain: await make() };
        for (let s = 0; s < 5; s++) await both(rts, decode(s), `decode step ${s}`);
        const snap = await rts.ahead.readState(0);
        for (const rt of [rts.ahead, rts.plain]) rt.writeState(2, snap);
        await both(rts, decode(5), 'after a state write');
        await both(rts, [{ slot: 3, tokens: [5, 6, 7, 8, 9, 10], output: 'last' }], 'a prefill in between');
        for (let s = 6; s < 10; s++) await both(rts, decode(s), `decode again, step ${s}`);
        assert.strictEqual(rts.ahead.ahead.hits, 6);
        assert.strictEqual(rts.plain.ahead.hits, 0);
      });
    }
  });
});
