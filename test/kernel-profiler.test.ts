// The kernel profiler (engine/gpu/kernel-profiler.ts): per-dispatch GPU times by label, without changing results.

import * as assert from 'assert';
import { createBackend } from '../engine/backend';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { KernelProfiler } from '../engine/gpu/kernel-profiler';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';

describe('kernel profiler', function () {
  this.timeout(300000);
  let gpu: GpuContext;
  before(async function () {
    gpu = await acquireGpu();
    if (!gpu.device.features.has('timestamp-query')) this.skip();
  });

  it('times every dispatch of a step by kernel, and the step gives the same logits', async () => {
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 64, vocabSize: 300, dtype: 'f32', seed: 3 });
    const be = await createBackend({ model: ck, slots: 2, precision: 'f32', gpu, device: 'gpu' });
    try {
      const runtime = be as unknown as Rwkv7Runtime;
      const jobs = () => [
        { slot: 0, tokens: [5, 6, 7], output: 'last' as const },
        { slot: 1, tokens: [9], output: 'last' as const },
      ];
      const plain = (await be.run(jobs())).map((r) => Float32Array.from(r as Float32Array));
      be.resetState(0);
      be.resetState(1);
      const profiler = new KernelProfiler(gpu.device);
      runtime.profiler = profiler;
      const profiled = await be.run(jobs());
      await profiler.collect();
      runtime.profiler = null;
      profiled.forEach((r, i) => assert.deepStrictEqual(Float32Array.from(r as Float32Array), plain[i]));
      const report = profiler.report();
      profiler.dispose();
      const labels = report.map((k) => k.label);
      // Per layer: two norms with their shift saves, prep, wkv, post and five matrix groups; then the head.
      for (const l of ['ln_shift', 'save_shift', 'rwkv7_prep', 'rwkv7_wkv', 'rwkv7_post', 'layer_norm']) assert.ok(labels.includes(l), `${l} in ${labels}`);
      for (const m of ['rkv', 'lora1', 'lora2', 'o', 'fk', 'fv', 'head']) assert.ok(labels.some((x) => x.endsWith(`:${m}`)), `matrix ${m} in ${labels}`);
      assert.strictEqual(report.find((k) => k.label === 'rwkv7_wkv')!.dispatchesPerStep, 2);
      assert.ok(report.every((k) => k.microsPerStep >= 0) && report.some((k) => k.microsPerStep > 0));
      assert.ok(Math.abs(report.reduce((a, k) => a + k.share, 0) - 1) < 0.01);
    } finally {
      be.dispose();
    }
  });

  it('a decode step (one token a job) saves the shift state inside the norm kernel: no save_shift dispatches, same logits', async () => {
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 64, vocabSize: 300, dtype: 'f32', seed: 4 });
    const be = await createBackend({ model: ck, slots: 2, precision: 'f32', gpu, device: 'gpu' });
    try {
      const runtime = be as unknown as Rwkv7Runtime;
      // Reference: the same tokens through multi-token calls (separate save_shift), then one more token each.
      await be.run([{ slot: 0, tokens: [1, 2, 3], output: 'none' }, { slot: 1, tokens: [4, 5], output: 'none' }]);
      const chunked = (await be.run([{ slot: 0, tokens: [6, 7], output: 'last' }, { slot: 1, tokens: [8, 9], output: 'last' }])).map((r) => Float32Array.from(r as Float32Array));
      be.resetState(0);
      be.resetState(1);
      await be.run([{ slot: 0, tokens: [1, 2, 3], output: 'none' }, { slot: 1, tokens: [4, 5], output: 'none' }]);
      const profiler = new KernelProfiler(gpu.device);
      runtime.profiler = profiler;
      await be.run([{ slot: 0, tokens: [6], output: 'none' }, { slot: 1, tokens: [8], output: 'none' }]);
      const stepwise = await be.run([{ slot: 0, tokens: [7], output: 'last' }, { slot: 1, tokens: [9], output: 'last' }]);
      await profiler.collect();
      runtime.profiler = null;
      const labels = profiler.report().map((k) => k.label);
      profiler.dispose();
      assert.ok(labels.includes('ln_shift') && !labels.includes('save_shift'), labels.join(', '));
      stepwise.forEach((r, i) => {
        const got = r as Float32Array;
        const err = Math.sqrt(got.reduce((a, v, k) => a + (v - chunked[i][k]) ** 2, 0) / chunked[i].reduce((a, v) => a + v * v, 0));
        assert.ok(err < 1e-5, `slot ${i}: relative L2 ${err}`);
      });
    } finally {
      be.dispose();
    }
  });

  it('with a repeat, dispatches each kernel that many times in its pass: accumulating products add again, times are divided', async () => {
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 64, vocabSize: 300, dtype: 'f32', seed: 5 });
    const be = await createBackend({ model: ck, slots: 1, precision: 'f32', gpu, device: 'gpu' });
    try {
      const runtime = be as unknown as Rwkv7Runtime;
      const job = [{ slot: 0, tokens: [5, 6, 7], output: 'last' as const }];
      const plain = Float32Array.from((await be.run(job))[0] as Float32Array);
      be.resetState(0);
      const profiler = new KernelProfiler(gpu.device, 2048, 3);
      runtime.profiler = profiler;
      const repeated = (await be.run(job))[0] as Float32Array;
      await profiler.collect();
      runtime.profiler = null;
      // The output and FFN value products add into the residual: three times, so the logits move.
      const diff = repeated.reduce((a, v, i) => a + Math.abs(v - plain[i]), 0) / plain.reduce((a, v) => a + Math.abs(v), 0);
      assert.ok(diff > 1e-3, `logits moved by ${diff}`);
      const report = profiler.report();
      profiler.dispose();
      // Still one entry a dispatch of the step, not three.
      assert.strictEqual(report.find((k) => k.label === 'rwkv7_wkv')!.dispatchesPerStep, 2);
      assert.ok(report.some((k) => k.microsPerStep > 0));
    } finally {
      be.dispose();
    }
  });

  it('refuses a repeat outside 1..64', () => {
    const fake = { features: new Set<string>(['timestamp-query']) } as unknown as GPUDevice;
    for (const r of [0, 65, 1.5]) assert.throws(() => new KernelProfiler(fake, 16, r), /repeat/);
  });

  it('refuses a device without timestamp queries, naming the feature', () => {
    const fake = { features: new Set<string>() } as unknown as GPUDevice;
    assert.throws(() => new KernelProfiler(fake), /timestamp-query/);
  });
});
