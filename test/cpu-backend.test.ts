// The CPU backend (engine/cpu/cpu-runtime.ts) at the InferenceBackend level, on a small random model so no
// GPU and no golden data are needed: output 'top' (capacity, ties by lower row, logZ, finite count, adjustments
// and the grammar's allowed bitset) against a plain reference, state read / write / copy / reset and their order
// relative to calls in flight, thread counts, and the choice of device. The logits themselves are checked
// against the official reference by test/golden.test.ts (suite [cpu]).

import { strict as assert } from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { chooseDevice } from '../engine/cpu/device-choice';
import { parseModelConfig } from '../nodes/shared/model-config';
import * as fs from 'fs';
import * as path from 'path';
import { KERNELS_FILE, RELAXED_KERNELS_FILE } from '../engine/cpu/wasm-kernels';
import { reduceTop } from '../engine/cpu/top-logits-cpu';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { TOP_CAPACITY } from '../engine/rwkv7/top-logits';
import type { LogitAdjust, TopLogits } from '../engine/types';

/** The meaning of 'top': the capacity largest finite values after mask and adjustments, ties by lower row. */
function reference(row: Float32Array, adjust?: LogitAdjust) {
  const x = Float32Array.from(row);
  if (adjust?.allowed) x.forEach((_, i) => ((adjust.allowed![i >>> 5] >>> (i & 31)) & 1 ? 0 : (x[i] = -Infinity)));
  if (adjust) adjust.rows.forEach((r, i) => (x[r] += adjust.deltas[i]));
  const finite = Array.from(x.keys()).filter((i) => x[i] > -Infinity);
  finite.sort((a, b) => x[b] - x[a] || a - b);
  const max = finite.length ? x[finite[0]] : -Infinity;
  let sum = 0;
  for (const i of finite) sum += Math.exp(x[i] - max);
  return { x, kept: finite.slice(0, TOP_CAPACITY), max, logZ: finite.length ? Math.log(sum) : -Infinity, finite: finite.length };
}

function assertTop(got: TopLogits, row: Float32Array, adjust: LogitAdjust | undefined, label: string) {
  const ref = reference(row, adjust);
  assert.equal(got.kind, 'top');
  assert.equal(got.finite, ref.finite, `${label}: finite count`);
  // Exactly the reference's rows in its order: ties at the cut and in the list go to the lower row.
  assert.deepEqual(Array.from(got.rows), ref.kept, `${label}: rows`);
  assert.deepEqual(Array.from(got.logits), ref.kept.map((i) => ref.x[i]), `${label}: values`);
  assert.equal(got.max, ref.max, `${label}: max`);
  // The sum's terms come from the kernels' f32 vector exp (row-stats.ts), within 2 ulp: logZ within ~3e-7 of
  // float64 (the GPU reduction's test allows 1e-5).
  if (ref.finite > 0) assert.ok(Math.abs(got.logZ - ref.logZ) < 1e-6 * Math.max(1, Math.abs(ref.logZ)), `${label}: logZ ${got.logZ} vs ${ref.logZ}`);
  else assert.equal(got.logZ, -Infinity);
}

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const bits = (V: number, allow: (i: number) => boolean) => {
  const b = new Uint32Array(Math.ceil(V / 32));
  for (let i = 0; i < V; i++) if (allow(i)) b[i >>> 5] |= 1 << (i & 31);
  return b;
};

describe("CPU backend: output 'top' reduction", () => {
  it('keeps the capacity largest entries, ties by lower row, with the normalizer and finite count', () => {
    const V = 5000;
    const rnd = seeded(3);
    const cases: [string, Float32Array, LogitAdjust | undefined][] = [
      ['random', Float32Array.from({ length: V }, () => (rnd() - 0.5) * 20), undefined],
      ['flat: every value tied', new Float32Array(V).fill(0.25), undefined],
      ['few values repeated, ties across the cut', Float32Array.from({ length: V }, (_, i) => (i * 7) % 5), undefined],
      ['NaN and -inf are no candidates', Float32Array.from({ length: V }, (_, i) => (i % 7 === 0 ? NaN : i % 2 ? -Infinity : Math.sin(i))), undefined],
      ['nothing finite', new Float32Array(V).fill(-Infinity), undefined],
    ];
    const adjRows = Int32Array.from({ length: 300 }, (_, k) => (k * 131 + 17) % V);
    const adjust: LogitAdjust = { rows: adjRows, deltas: Float32Array.from(adjRows, (_, k) => (k === 0 ? -Infinity : k % 2 ? 6 : -6)) };
    cases.push(['adjustments move rows in and out', Float32Array.from({ length: V }, () => (rnd() - 0.5) * 8), adjust]);
    cases.push(['a grammar mask plus adjustments on allowed and masked rows', Float32Array.from({ length: V }, () => (rnd() - 0.5) * 8), { ...adjust, allowed: bits(V, (i) => i % 3 === 1) }]);
    cases.push(['a mask allowing fewer rows than the capacity', Float32Array.from({ length: V }, () => rnd()), { rows: new Int32Array(0), deltas: new Float32Array(0), allowed: bits(V, (i) => i % 601 === 0) }]);
    cases.push(['a mask allowing nothing', Float32Array.from({ length: V }, () => rnd()), { rows: Int32Array.of(5), deltas: Float32Array.of(1), allowed: bits(V, () => false) }]);
    for (const [label, row, adj] of cases) assertTop(reduceTop(Float32Array.from(row), adj, TOP_CAPACITY), row, adj, label);
  });
});

describe('CPU backend', function () {
  this.timeout(120_000);
  // 2 heads, 2 layers; a vocabulary that is not a multiple of 32 (the bitset's last word is partial).
  const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 1000, seed: 11 });
  const V = 1000;
  let be: Backend;
  before(async () => {
    be = await createBackend({ model: ck, slots: 4, device: 'cpu', threads: 2, precision: 'f32' });
  });
  after(() => be?.dispose());

  const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % V);

  it('says it runs on the CPU', () => {
    assert.match(be.adapterName, /^CPU: WebAssembly SIMD kernels( with fused multiply-add)?, 2 threads, f32 weights/);
  });

  it("'top' equals the reduction of the full row, with adjustments and a grammar mask", async () => {
    be.resetState(0);
    const [all] = await be.run([{ slot: 0, tokens: prompt, output: 'last' }]);
    const row = Float32Array.from(all!);
    const adjusts: (LogitAdjust | undefined)[] = [
      undefined,
      { rows: Int32Array.of(3, 999, 500), deltas: Float32Array.of(50, 40, -Infinity) },
      { rows: Int32Array.of(2, 4), deltas: Float32Array.of(100, 1), allowed: bits(V, (i) => i % 4 === 0 || i === 999) },
    ];
    for (const [i, adjust] of adjusts.entries()) {
      be.resetState(1);
      const [top] = await be.run([{ slot: 1, tokens: prompt, output: 'top', adjust }]);
      assertTop(top as TopLogits, row, adjust, `adjust ${i}`);
    }
  });

  // The compute thread reduces 'top' rows where the head wrote them (cpu-forward-base.ts): in a call that mixes
  // outputs and is split into sub-passes (maxTokens 7, maxRows 2), each job gets what it gets alone, and each 'top'
  // is the reduction of its own full row with its own adjustments.
  it("reduces 'top' rows in calls mixing outputs over several sub-passes", async () => {
    const small = await createBackend({ model: ck, slots: 4, device: 'cpu', threads: 1, precision: 'f32', maxTokens: 7, maxRows: 2 });
    try {
      const adjust: LogitAdjust = { rows: Int32Array.of(2, 700), deltas: Float32Array.of(30, -Infinity), allowed: bits(V, (i) => i % 3 !== 0) };
      // Sub-passes: [last, top] (the 'top' row second in the head's rows), then the 'all' rows, then the long 'top'.
      const jobs = [
        { slot: 3, tokens: prompt.slice(1, 3), output: 'last' as const },
        { slot: 2, tokens: prompt.slice(5, 8), output: 'top' as const },
        { slot: 1, tokens: prompt.slice(3, 8), output: 'all' as const },
        { slot: 0, tokens: prompt.slice(0, 9), output: 'top' as const, adjust },
      ];
      for (let s = 0; s < 4; s++) small.resetState(s);
      const mixed = await small.run(jobs);
      for (const [i, j] of jobs.entries()) {
        small.resetState(j.slot);
        const alone = await small.run([{ slot: j.slot, tokens: j.tokens, output: j.output === 'all' ? 'all' : 'last' }]);
        if (j.output === 'top') assertTop(mixed[i] as TopLogits, alone[0]!, j.adjust, `job ${i}`);
        else assert.deepEqual(Array.from(mixed[i] as Float32Array), Array.from(alone[0]!), `job ${i}`);
      }
    } finally {
      small.dispose();
    }
  });

  it('refuses malformed adjustments before running', async () => {
    await assert.rejects(be.run([{ slot: 0, tokens: [1], output: 'top', adjust: { rows: Int32Array.of(1, 1), deltas: Float32Array.of(1, 2) } }]), /row 1 appears twice/);
    await assert.rejects(be.run([{ slot: 0, tokens: [1], output: 'top', adjust: { rows: Int32Array.of(1000), deltas: Float32Array.of(1) } }]), /outside the vocabulary/);
    await assert.rejects(be.run([{ slot: 0, tokens: [1], output: 'top', adjust: { rows: Int32Array.of(3), deltas: Float32Array.of(NaN) } }]), /delta for row 3/);
    await assert.rejects(
      be.run([{ slot: 0, tokens: [1], output: 'top', adjust: { rows: new Int32Array(0), deltas: new Float32Array(0), allowed: new Uint32Array(3) } }]),
      /allowed has 3 words/,
    );
    await assert.rejects(be.run([{ slot: 0, tokens: [1], output: 'last', adjust: { rows: new Int32Array(0), deltas: new Float32Array(0) } }]), /for output 'top' only/);
  });

  it('reads, writes, copies and resets states; a restored state continues identically', async () => {
    be.resetState(0);
    await be.run([{ slot: 0, tokens: prompt.slice(0, 25), output: 'none' }]);
    const snap = await be.readState(0);
    assert.equal(snap.length, be.stateSize);
    assert.ok(snap.some((v) => v !== 0));
    be.writeState(2, snap);
    be.copyState(0, 3);
    const outs = await be.run([0, 2, 3].map((slot) => ({ slot, tokens: prompt.slice(25), output: 'all' as const })));
    assert.deepEqual(Array.from(outs[1]!), Array.from(outs[0]!));
    assert.deepEqual(Array.from(outs[2]!), Array.from(outs[0]!));
    // The snapshot is a copy: changing it changes no slot.
    snap.fill(7);
    assert.notEqual((await be.readState(2))[0], 7);
    be.resetState(2);
    assert.ok((await be.readState(2)).every((v) => v === 0));
    assert.throws(() => be.writeState(1, new Float32Array(3)), /state has 3 floats/);
    assert.throws(() => be.copyState(0, 9), /slot 9 is out of range/);
  });

  it('orders state changes after the calls already in flight, as a GPU queue does', async () => {
    be.resetState(0);
    const running = be.run([{ slot: 0, tokens: prompt, output: 'none' }]);
    be.resetState(0); // made while the call above is running: applies after it
    await running;
    assert.ok((await be.readState(0)).every((v) => v === 0), 'the reset was overtaken by the call before it');
    const filled = new Float32Array(be.stateSize).fill(0.5);
    const again = be.run([{ slot: 1, tokens: prompt, output: 'none' }]);
    be.writeState(1, filled);
    filled.fill(0); // the backend kept its own copy
    await again;
    assert.ok((await be.readState(1)).every((v) => v === 0.5));
  });

  it('gives the same logits on 1 and 2 threads, alone and batched, in one call or in chunks', async () => {
    const one = await createBackend({ model: ck, slots: 4, device: 'cpu', threads: 1, precision: 'f32', maxTokens: 7, maxRows: 5 });
    try {
      for (const b of [be, one]) for (let s = 0; s < 4; s++) b.resetState(s);
      const jobs = [
        { slot: 0, tokens: prompt, output: 'all' as const },
        { slot: 1, tokens: prompt.slice(0, 3), output: 'last' as const },
        { slot: 3, tokens: [9], output: 'all' as const },
      ];
      const a = await be.run(jobs);
      const b = await one.run(jobs);
      a.forEach((x, i) => assert.deepEqual(Array.from(b[i]!), Array.from(x!), `job ${i}`));
    } finally {
      one.dispose();
    }
  });

  it('f16 weights stay within the f16 tolerance of f32', async () => {
    const half = await createBackend({ model: ck, slots: 1, device: 'cpu', threads: 1, precision: 'f16' });
    try {
      be.resetState(0);
      const [a] = await be.run([{ slot: 0, tokens: prompt, output: 'last' }]);
      const [b] = await half.run([{ slot: 0, tokens: prompt, output: 'last' }]);
      let d = 0;
      let n = 0;
      a!.forEach((v, i) => ((d += (v - b![i]) ** 2), (n += v * v)));
      assert.ok(Math.sqrt(d / n) < 5e-3, `rel L2 ${Math.sqrt(d / n)}`);
      assert.ok(Math.sqrt(d / n) > 0, 'f16 weights should differ from f32 somewhere');
    } finally {
      half.dispose();
    }
  });

  it('refuses calls after dispose', async () => {
    const b = await createBackend({ model: ck, slots: 1, device: 'cpu', threads: 1 });
    b.dispose();
    await assert.rejects(b.run([{ slot: 0, tokens: [1], output: 'last' }]), /disposed/);
  });
});

describe('device choice', () => {
  it("takes 'cpu' without looking for a GPU and refuses unknown devices", async () => {
    assert.deepEqual(await chooseDevice('cpu'), { device: 'cpu', reason: 'device: cpu' });
    await assert.rejects(chooseDevice('tpu' as never), /device must be 'auto', 'gpu' or 'cpu', got "tpu"/);
    const tiny = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, vocabSize: 64 });
    await assert.rejects(createBackend({ model: tiny, slots: 1, device: 'npu' as never }), /device must be/);
    for (const threads of [0, 1.5, NaN]) await assert.rejects(createBackend({ model: tiny, slots: 1, device: 'cpu', threads }), /threads must be an integer/);
  });
});

describe('device in the model configuration', () => {
  it('passes auto, gpu and cpu through and names the field when refusing anything else', () => {
    for (const device of ['auto', 'gpu', 'cpu']) assert.equal(parseModelConfig({ device }).device, device);
    assert.equal(parseModelConfig({}).device, undefined);
    assert.throws(() => parseModelConfig({ device: 'vulkan' }), /device.*must be "auto", "gpu" or "cpu", got "vulkan"/);
  });
});

describe('CPU backend build', () => {
  it('ships both kernel builds and the worker entries beside the compiled engine (the package runs no build step)', () => {
    const engine = path.resolve(__dirname, '..', 'engine');
    for (const f of [KERNELS_FILE, RELAXED_KERNELS_FILE, path.join(engine, 'cpu', 'helper-worker.js'), path.join(engine, 'cpu', 'cpu-worker.js')]) {
      assert.ok(fs.existsSync(f), `${f} is missing`);
    }
    assert.ok(WebAssembly.validate(new Uint8Array(fs.readFileSync(KERNELS_FILE))), 'the plain SIMD build must load on every supported Node');
  });
});
