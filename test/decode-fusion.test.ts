// The fused decode step of RWKV-7 (engine/rwkv7/runtime.ts, shaders/rwkv7_tmix_decode.wgsl): how many dispatches
// a step records, and that the fused step gives the logits and states of the separate kernels.

import * as assert from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { gpuBackends } from './gpu-backends';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { DECODE_FUSE_JOBS, fuseDecodeJobsFromEnv, tmixLanesFrom, type Rwkv7Runtime } from '../engine/rwkv7/runtime';
import { VEC_LOADS } from '../engine/rwkv7/vec-loads';
import type { Precision } from '../engine/precision';

/** Relative L2 distance of `got` from `want`. */
function relL2(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let d = 0;
  let n = 0;
  for (let i = 0; i < want.length; i++) {
    d += (got[i] - want[i]) ** 2;
    n += want[i] ** 2;
  }
  return Math.sqrt(d / Math.max(n, 1e-30));
}

describe('RWKV-7 fused decode step', function () {
  this.timeout(300000);
  const fixture = gpuBackends();

  type LoraDims = { w: number; a: number; v: number; g: number };
  async function runtimeFor(opts: { nLayer: number; nEmbd: number; precision: Precision; variant?: 'v7' | 'v7a'; seed?: number; slots?: number; loraDims?: LoraDims }) {
    const ck = randomRwkv7Checkpoint({ nLayer: opts.nLayer, nEmbd: opts.nEmbd, vocabSize: 300, dtype: 'f32', seed: opts.seed ?? 5, variant: opts.variant, loraDims: opts.loraDims });
    const be = fixture.open(await createBackend({ model: ck, slots: opts.slots ?? 4, precision: opts.precision, gpu: fixture.gpu, device: 'gpu' }));
    return be as unknown as Rwkv7Runtime & Backend;
  }

  // The streaming product's label names its tokens a pass and its loads a trip (engine/rwkv7/vec-loads.ts).
  const vec = `mm_vec4u${VEC_LOADS}`;
  const perLayer = (labels: string[]) => labels.slice(1, labels.indexOf('layer_norm'));

  it('a decode step records 7 dispatches a layer instead of 11 (the 0.1B and 1.5B layer counts)', async () => {
    for (const nLayer of [12, 24]) {
      const rt = await runtimeFor({ nLayer, nEmbd: 64, precision: 'f16' });
      const fused = rt.dispatchLabels(1, 1, 1);
      assert.deepStrictEqual(fused.slice(0, 8), [
        'embed', 'ln_shift', `${vec}:rkv+lora1`, 'rwkv7_tmix_decode', `${vec}:o`, 'ln_shift', `${vec}:fk`, `${vec}:fv`,
      ]);
      assert.deepStrictEqual(fused.slice(-2), ['layer_norm', `${vec}:head`]);
      assert.strictEqual(fused.length, 7 * nLayer + 3, fused.join(', '));
      rt.fuseDecodeJobs = 0;
      const separate = rt.dispatchLabels(1, 1, 1);
      assert.strictEqual(separate.length, 11 * nLayer + 3, separate.join(', '));
      assert.ok(fused.length <= 0.7 * separate.length, `${fused.length} against ${separate.length}`);
      rt.dispose();
    }
  });

  it('fuses decode steps of up to fuseDecodeJobs jobs only, never a prefill chunk or a forced WKV kernel', async () => {
    const rt = await runtimeFor({ nLayer: 2, nEmbd: 128, precision: 'f32' });
    const fusedCount = (T: number, J: number) => rt.dispatchLabels(T, J, J).filter((l) => l === 'rwkv7_tmix_decode').length;
    assert.strictEqual(fusedCount(4, 4), 2);
    assert.strictEqual(fusedCount(8, 2), 0);
    rt.fuseDecodeJobs = 3;
    assert.strictEqual(fusedCount(3, 3), 2);
    assert.strictEqual(fusedCount(4, 4), 0);
    rt.fuseDecodeJobs = 8;
    rt.wkvVariant = { kind: 'row' };
    assert.strictEqual(fusedCount(1, 1), 0);
    assert.strictEqual(perLayer(rt.dispatchLabels(1, 1, 1)).length, 2 * 11);
  });

  it('by default fuses batched decode steps up to 64 jobs (the H200 ran 32 and 64 faster fused), and 40 fused jobs give the separate kernels\' logits and states', async () => {
    assert.strictEqual(DECODE_FUSE_JOBS, 64);
    const J = 40;
    const rt = await runtimeFor({ nLayer: 2, nEmbd: 128, precision: 'f16', slots: J, seed: 13 });
    assert.strictEqual(rt.fuseDecodeJobs, fuseDecodeJobsFromEnv());
    rt.fuseDecodeJobs = DECODE_FUSE_JOBS;
    assert.ok(rt.dispatchLabels(J, J, J).includes('rwkv7_tmix_decode'));
    assert.ok(!rt.dispatchLabels(65, 65, 65).includes('rwkv7_tmix_decode'));
    const run = async (fuse: number) => {
      rt.fuseDecodeJobs = fuse;
      for (let s = 0; s < J; s++) rt.resetState(s);
      await rt.run(Array.from({ length: J }, (_, slot) => ({ slot, tokens: [1 + (slot % 7), 2 + (slot % 11)], output: 'none' as const })));
      const logits: Float32Array[] = [];
      for (let step = 0; step < 2; step++) {
        const out = await rt.run(Array.from({ length: J }, (_, slot) => ({ slot, tokens: [(slot * 13 + step * 7) % 300], output: 'last' as const })));
        for (const r of out) logits.push(Float32Array.from(r as Float32Array));
      }
      const states = await Promise.all([0, 17, J - 1].map((s) => rt.readState(s)));
      return { logits, states };
    };
    const separate = await run(0);
    const fused = await run(DECODE_FUSE_JOBS);
    fused.logits.forEach((l, i) => assert.ok(relL2(l, separate.logits[i]) < 2e-5, `logits row ${i}: relative L2 ${relL2(l, separate.logits[i])}`));
    fused.states.forEach((st, i) => assert.ok(relL2(st, separate.states[i]) < 2e-5, `state ${i}: relative L2 ${relL2(st, separate.states[i])}`));
  });

  it('RWKV_FUSE_DECODE_JOBS sets the default (0 turns it off); a value that is not a count is refused by name', () => {
    assert.strictEqual(fuseDecodeJobsFromEnv({}), DECODE_FUSE_JOBS);
    assert.strictEqual(fuseDecodeJobsFromEnv({ RWKV_FUSE_DECODE_JOBS: '0' }), 0);
    assert.strictEqual(fuseDecodeJobsFromEnv({ RWKV_FUSE_DECODE_JOBS: '64' }), 64);
    for (const bad of ['-1', '2.5', 'yes', '8 ']) assert.throws(() => fuseDecodeJobsFromEnv({ RWKV_FUSE_DECODE_JOBS: bad }), /RWKV_FUSE_DECODE_JOBS/);
  });

  it('RWKV_TMIX_LANES: 1, 2, 4 or 8, unset the default\'s choice; anything else is refused by name', () => {
    assert.strictEqual(tmixLanesFrom(undefined), 0);
    assert.strictEqual(tmixLanesFrom('8'), 8);
    for (const bad of ['3', '16', 'x']) assert.throws(() => tmixLanesFrom(bad), /RWKV_TMIX_LANES=/);
  });

  it('int8 models (f16 LoRAs beside int8 projections) fuse the time mix but keep rkv and lora1 apart: 8 a layer', async () => {
    const rt = await runtimeFor({ nLayer: 2, nEmbd: 128, precision: 'int8' });
    const layer = perLayer(rt.dispatchLabels(1, 1, 1));
    assert.strictEqual(layer.length, 2 * 8, layer.join(', '));
    assert.ok(layer.includes('rwkv7_tmix_decode') && layer.some((l) => l.endsWith(':lora1>tm')), layer.join(', '));
  });

  for (const c of [
    { precision: 'f32' as const, variant: 'v7' as const },
    { precision: 'f16' as const, variant: 'v7' as const },
    { precision: 'int8' as const, variant: 'v7' as const },
    { precision: 'f32' as const, variant: 'v7a' as const },
    // The 1.5B ranks (96/96/64/256): LoRA outputs of 3–32 steps of 8 inputs, whole trips of 4 loads and tails.
    { precision: 'f16' as const, variant: 'v7' as const, loraDims: { w: 96, a: 96, v: 64, g: 256 } as LoraDims },
  ] as { precision: Precision; variant: 'v7' | 'v7a'; loraDims?: LoraDims }[]) {
    const ranks = c.loraDims ? `, LoRA ranks ${Object.values(c.loraDims).join('/')}` : '';
    it(`${c.variant} ${c.precision}${ranks}: fused decode steps give the separate kernels' logits and states (3 jobs, 4 steps)`, async () => {
      const rt = await runtimeFor({ nLayer: 3, nEmbd: 128, precision: c.precision, variant: c.variant, seed: 11, loraDims: c.loraDims });
      const prompts = [[1, 2, 3, 4, 5], [7, 8], [9, 10, 11]];
      const steps = [[12, 13, 14], [15, 16, 17], [18, 19, 20], [21, 22, 23]];
      const run = async (fuse: number) => {
        rt.fuseDecodeJobs = fuse;
        for (let s = 0; s < 3; s++) rt.resetState(s);
        await rt.run(prompts.map((tokens, slot) => ({ slot, tokens, output: 'none' as const })));
        const logits: Float32Array[] = [];
        for (const step of steps) {
          const out = await rt.run(step.map((t, slot) => ({ slot, tokens: [t], output: 'last' as const })));
          for (const r of out) logits.push(Float32Array.from(r as Float32Array));
        }
        const states = await Promise.all([0, 1, 2].map((s) => rt.readState(s)));
        return { logits, states };
      };
      const separate = await run(0);
      const fused = await run(8);
      assert.ok(rt.dispatchLabels(3, 3, 3).includes('rwkv7_tmix_decode'));
      // Its LoRA loads issued 1 step at a time (the default issues 4): the same sums in the same order, so the same bits.
      assert.equal(rt.tmixLoraLoads, 4);
      rt.tmixLoraLoads = 1;
      try {
        const ahead = await run(8);
        ahead.logits.forEach((l, i) => assert.deepEqual(new Uint32Array(l.buffer), new Uint32Array(fused.logits[i].buffer), `LU 1: logits row ${i}`));
        ahead.states.forEach((st, i) => assert.deepEqual(new Uint32Array(st.buffer, st.byteOffset, st.length), new Uint32Array(fused.states[i].buffer, fused.states[i].byteOffset, fused.states[i].length), `LU 1: state ${i}`));
      } finally {
        rt.tmixLoraLoads = 4;
      }
      // 8 lanes a state row (512 a workgroup at N = 64), where the device allows them: the same values.
      if ((rt as unknown as { device: GPUDevice }).device.limits.maxComputeInvocationsPerWorkgroup >= 512 && c.loraDims) {
        const lanesBefore = rt.tmixLanes;
        rt.tmixLanes = 8;
        try {
          const wide = await run(8);
          wide.logits.forEach((l, i) => assert.ok(relL2(l, separate.logits[i]) < 2e-5, `8 lanes: logits row ${i}`));
          wide.states.forEach((st, i) => assert.ok(relL2(st, separate.states[i]) < 2e-5, `8 lanes: state ${i}`));
        } finally {
          rt.tmixLanes = lanesBefore;
        }
      }
      fused.logits.forEach((l, i) => {
        const e = relL2(l, separate.logits[i]);
        assert.ok(e < 2e-5, `logits row ${i}: relative L2 ${e}`);
      });
      fused.states.forEach((s, i) => {
        const e = relL2(s, separate.states[i]);
        assert.ok(e < 2e-5, `state of slot ${i}: relative L2 ${e}`);
      });
    });
  }
});
