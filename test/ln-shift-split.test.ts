// The layer norm + token shift of a decode step spread over several workgroups a token (shaders/ln_shift.wgsl
// SPLIT, engine/gpu/ln-shift-split.ts): the policy, the dispatch it records, and that a split norm gives the
// same bits as one workgroup a token (every workgroup computes the row statistics the same way).

import * as assert from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { lnShiftSplit } from '../engine/gpu/ln-shift-split';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';

describe('split layer norm + token shift', function () {
  this.timeout(300000);
  let gpu: GpuContext;
  before(async () => {
    gpu = await acquireGpu();
  });

  it('splits a token over slices of at least 256 columns until a step has 32 norm workgroups', () => {
    assert.strictEqual(lnShiftSplit(1, 2048), 8);
    assert.strictEqual(lnShiftSplit(1, 768), 3);
    assert.strictEqual(lnShiftSplit(8, 2048), 4);
    assert.strictEqual(lnShiftSplit(32, 2048), 1);
    assert.strictEqual(lnShiftSplit(512, 4096), 1);
    assert.strictEqual(lnShiftSplit(1, 128), 1);
  });

  it('a decode step records the split norms; a prefill chunk keeps one workgroup a token', async () => {
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 768, vocabSize: 300, dtype: 'f32', seed: 3 });
    const be = await createBackend({ model: ck, slots: 4, precision: 'f16', gpu, device: 'gpu' });
    try {
      const rt = be as unknown as Rwkv7Runtime;
      const norms = (T: number, J: number) => rt.dispatchSizes(T, J, J).filter((d) => d.label === 'ln_shift');
      assert.deepStrictEqual(norms(1, 1).map((d) => [d.x, d.y]), [[1, 3], [1, 3], [1, 3], [1, 3]]);
      assert.deepStrictEqual(norms(64, 1).map((d) => [d.x, d.y]), [[64, 1], [64, 1], [64, 1], [64, 1]]);
    } finally {
      be.dispose();
    }
  });

  for (const variant of ['v7', 'v7a'] as const) {
    it(`${variant}: split norms give the bits of one workgroup a token (decode and prefill, logits and states)`, async () => {
      const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 768, vocabSize: 300, dtype: 'f32', seed: 9, variant });
      const be = (await createBackend({ model: ck, slots: 3, precision: 'f32', gpu, device: 'gpu' })) as Backend & Rwkv7Runtime;
      try {
        const run = async (split: number | null) => {
          be.lnSplit = split;
          for (let s = 0; s < 3; s++) be.resetState(s);
          const out: Float32Array[] = [];
          for (const r of await be.run([{ slot: 0, tokens: [1, 2, 3, 4], output: 'last' }, { slot: 1, tokens: [5, 6], output: 'last' }])) {
            out.push(Float32Array.from(r as Float32Array));
          }
          for (const step of [[7, 8, 9], [10, 11, 12]]) {
            for (const r of await be.run(step.map((t, slot) => ({ slot, tokens: [t], output: 'last' as const })))) out.push(Float32Array.from(r as Float32Array));
          }
          const states = await Promise.all([0, 1, 2].map((s) => be.readState(s)));
          return { out, states };
        };
        const one = await run(1);
        const split = await run(null);
        assert.ok(be.dispatchSizes(3, 3, 3).some((d) => d.label === 'ln_shift' && d.y === 3));
        one.out.forEach((l, i) => assert.deepStrictEqual(split.out[i], l, `logits ${i}`));
        one.states.forEach((s, i) => assert.deepStrictEqual(split.states[i], s, `state of slot ${i}`));
      } finally {
        be.dispose();
      }
    });
  }
});
