// Step spans (engine/gpu/step-span.ts), the benchmarks' view of a whole step's GPU time with kernel classes left
// out: a spanned step must run exactly the commands of a normal one (same logits, early submits kept), and what
// it leaves out must really not run.

import * as assert from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { StepSpan } from '../engine/gpu/step-span';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';

describe('step spans: whole steps timed, kernel classes left out', function () {
  this.timeout(300000);
  let gpu: GpuContext;
  let be: Backend & Rwkv7Runtime;
  before(async () => {
    gpu = await acquireGpu();
    const ck = randomRwkv7Checkpoint({ nLayer: 6, nEmbd: 64, vocabSize: 300, dtype: 'f32', seed: 9 });
    be = (await createBackend({ model: ck, slots: 2, precision: 'f32', gpu, device: 'gpu' })) as unknown as Backend & Rwkv7Runtime;
  });
  after(() => be?.dispose());

  const step = async (slot: number, tokens: number[]) => (await be.run([{ slot, tokens, output: 'last' }]))[0] as Float32Array;

  it('a spanned step (submits every layer, nothing left out) gives the logits of a normal one and a positive span', async () => {
    be.submitSchedule = { firstSubmitLayers: 1, layersPerSubmit: 1 };
    try {
      const normal = Float32Array.from(await step(0, [5, 6, 7]));
      const span = new StepSpan(gpu.device, null);
      be.stepSpan = span;
      try {
        const spanned = Float32Array.from(await step(1, [5, 6, 7]));
        await span.collect();
        assert.deepStrictEqual(spanned, normal);
        assert.ok(span.microsPerStep() > 0, `span ${span.microsPerStep()} µs`);
      } finally {
        be.stepSpan = null;
        span.dispose();
      }
    } finally {
      be.submitSchedule = { firstSubmitLayers: 4, layersPerSubmit: 4 };
    }
  });

  it('what a span leaves out does not run: without the layer norms + token shift the logits change', async () => {
    be.resetState(0);
    be.resetState(1);
    // (Not the products: the head is one, and without it the logits buffer keeps the step before's.)
    const span = new StepSpan(gpu.device, /^ln_shift/);
    assert.ok(!span.keeps('ln_shift') && span.keeps('rwkv7_wkv') && span.keeps('mm_vec4u2:head'));
    const normal = Float32Array.from(await step(0, [9]));
    be.stepSpan = span;
    try {
      const without = Float32Array.from(await step(1, [9]));
      await span.collect();
      assert.notDeepStrictEqual(without, normal);
    } finally {
      be.stepSpan = null;
      span.dispose();
    }
  });
});
