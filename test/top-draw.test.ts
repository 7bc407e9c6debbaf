// Tokens drawn on the GPU from the 'top' reduction (TopDrawer, shaders/top_draw.wgsl), several steps back to back in
// one command encoder, against the host's own sampling of the same steps: TokenSampler.sampleTop on a 'top' result
// reduced with TokenSampler.adjustments(), fed the same uniforms. The logits change between steps (copied in as the
// forward would write them) and the penalties evolve step to step on both sides.

import * as assert from 'assert';
import { acquireGpu, gpuBroken, type GpuContext } from '../engine/gpu/device';
import { createBuffer } from '../engine/gpu/kernel';
import { type DrawLanes, type DrawRow, drawLanesFrom, TopDrawer } from '../engine/rwkv7/top-draw';
import { JOB_WORDS, TOP_CAPACITY, TOP_SLICE, TopLogitsReducer } from '../engine/rwkv7/top-logits';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import type { RepetitionPenalty } from '../engine/samplers/penalties';
import type { TopLogits } from '../engine/types';

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

interface Spec {
  label: string;
  sampler: { temperature: number; topK?: number; topP?: number; presencePenalty?: number; frequencyPenalty?: number; penaltyDecay?: number; logitBias?: Record<number, number> };
  /** Rows drawn before the steps (the host records them; the drawer gets them as penalties). */
  prior?: number[];
  /** The step's logits of this row. */
  logits: (step: number) => Float32Array;
}

/** Usage of the test's buffers (GPUBufferUsage exists once a device is acquired). */
const storage = () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;

describe("output 'top': tokens drawn on the GPU (TopDrawer)", function () {
  this.timeout(600000);
  let gpu: GpuContext;

  before(async () => {
    gpu = await acquireGpu();
  });
  afterEach(() => assert.strictEqual(gpuBroken(gpu), null));

  async function read(enc: GPUCommandEncoder, parts: [GPUBuffer, number, number][]): Promise<Uint32Array[]> {
    const { device } = gpu;
    const total = parts.reduce((t, [, , size]) => t + size, 0);
    const staging = device.createBuffer({ size: total, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    let at = 0;
    for (const [buf, offset, size] of parts) enc.copyBufferToBuffer(buf, offset, staging, at, size), (at += size);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const words = new Uint32Array(staging.getMappedRange().slice(0));
    staging.destroy();
    at = 0;
    return parts.map(([, , size]) => words.slice(at / 4, (at += size) / 4));
  }

  /**
   * Runs `steps` draws of `specs` on the GPU (one encoder, no readback between steps), then the same on the host step
   * by step, and compares the drawn rows, the ids written, and the adjust state left for a next step.
   */
  async function compare(V: number, specs: Spec[], steps: number, seed: number, lanes?: DrawLanes) {
    const { device } = gpu;
    const n = specs.length;
    const rnd = seeded(seed);
    const uniforms = Float32Array.from({ length: steps * n }, () => Math.floor(rnd() * 2 ** 24) / 2 ** 24);
    const stepLogits = Array.from({ length: steps }, (_, s) => specs.map((sp) => sp.logits(s)));

    // Host samplers, fed the same uniforms.
    const samplers = specs.map((sp, i) => {
      const sampler = new TokenSampler(resolveSamplerOptions({ ...sp.sampler }), V, (id) => id);
      const internals = sampler as unknown as { random: { next(): number }; penalty: RepetitionPenalty };
      let step = 0;
      internals.random = { next: () => uniforms[step++ * n + i] };
      for (const r of sp.prior ?? []) internals.penalty.record(r);
      return { sampler, penalty: internals.penalty };
    });

    // The drawer: logits rows reversed (logitsRow is not the row index), ids at odd words of a sentinel-filled buffer.
    const SENTINEL = 0xdeadbeef;
    const logitsRow = (i: number) => n - 1 - i;
    const idsAt = (i: number) => 2 * i + 1;
    const idsWords = 2 * n + 2;
    const logits = createBuffer(device, 'draw-logits', n * V * 4, storage());
    const source = createBuffer(device, 'draw-source', steps * n * V * 4, storage());
    stepLogits.forEach((rows, s) => rows.forEach((x, i) => device.queue.writeBuffer(source, (s * n + logitsRow(i)) * V * 4, x)));
    const ids = createBuffer(device, 'draw-ids', idsWords * 4, storage());
    device.queue.writeBuffer(ids, 0, new Uint32Array(idsWords).fill(SENTINEL));
    const reducer = new TopLogitsReducer(device, V, n + 1, logits);
    const drawer = new TopDrawer(device, reducer, ids, n + 1, steps + 2, lanes);
    // Each row's draw as the scheduler makes it: the sampler's bias and its penalties so far (prior draws included).
    const drawRows: DrawRow[] = samplers.map(({ sampler }, i) => {
      const draw = sampler.drawParams(TOP_CAPACITY);
      if (!draw) throw new Error(`spec ${i}: its sampler cannot be drawn for on the GPU`);
      return { logitsRow: logitsRow(i), idsAt: idsAt(i), ...draw };
    });
    drawer.prepare(drawRows, uniforms, steps);
    const enc = device.createCommandEncoder();
    const idsBytes = idsWords * 4;
    const idsRecord = createBuffer(device, 'draw-ids-record', steps * idsBytes, storage());
    for (let s = 0; s < steps; s++) {
      // The forward's output for this step, then the draw.
      enc.copyBufferToBuffer(source, s * n * V * 4, logits, 0, n * V * 4);
      drawer.encode(enc);
      enc.copyBufferToBuffer(ids, 0, idsRecord, s * idsBytes, idsBytes);
    }
    // The drawn rows through the drawer's own copyOut, read back with the rest in one submit.
    const drawnBuf = createBuffer(device, 'draw-out', drawer.bytes(), storage());
    drawer.copyOut(enc, drawnBuf, 0);
    const [drawnWords, idsRec, jobs, adjust] = await read(enc, [
      [drawnBuf, 0, drawer.bytes()],
      [idsRecord, 0, steps * idsBytes],
      [reducer.jobsBuffer, 0, n * JOB_WORDS * 4],
      [reducer.adjustBuffer, 0, reducer.adjustBuffer.size],
    ]);
    const drawn = TopDrawer.parse(drawnWords);
    assert.strictEqual(drawn.length, steps * n);

    // The host, step by step: reduce with the sampler's adjustments, sampleTop.
    const hostLogits = createBuffer(device, 'host-logits', n * V * 4, storage());
    const hostReducer = new TopLogitsReducer(device, V, n, hostLogits);
    const expected: number[][] = [];
    let notTop1 = 0;
    for (let s = 0; s < steps; s++) {
      stepLogits[s].forEach((x, i) => device.queue.writeBuffer(hostLogits, i * V * 4, x));
      const e = device.createCommandEncoder();
      hostReducer.encode(e, samplers.map(({ sampler }, i) => ({ logitsRow: i, adjust: sampler.adjustments(), out: i })));
      const [words] = await read(e, [[hostReducer.outBuffer, 0, hostReducer.bytes(n)]]);
      const tops: TopLogits[] = specs.map((_, i) => TopLogitsReducer.parse(words, hostReducer.stride, i));
      expected.push(
        samplers.map(({ sampler }, i) => {
          try {
            const row = sampler.sampleTop(tops[i]);
            if (specs[i].sampler.temperature > 0 && row !== tops[i].rows[0]) notTop1++;
            return row;
          } catch (err) {
            assert.match(String(err), /no token is allowed/);
            return -1;
          }
        }),
      );
    }
    for (let s = 0; s < steps; s++) {
      const got = Array.from(drawn.subarray(s * n, (s + 1) * n));
      specs.forEach((sp, i) => assert.strictEqual(got[i], expected[s][i], `step ${s}, ${sp.label}: GPU drew ${got[i]}, host ${expected[s][i]} (all steps: GPU ${JSON.stringify(Array.from({ length: steps }, (_, t) => drawn[t * n + i]))}, host ${JSON.stringify(expected.map((e) => e[i]))})`));
      // The ids buffer holds each step's draw at idsAt (untouched where nothing could be drawn).
      const rec = idsRec.subarray(s * idsWords, (s + 1) * idsWords);
      specs.forEach((sp, i) => {
        const last = expected.slice(0, s + 1).map((e) => e[i]).filter((r) => r >= 0).pop();
        assert.strictEqual(rec[idsAt(i)], last ?? SENTINEL, `step ${s}, ${sp.label}: ids[${idsAt(i)}]`);
      });
      assert.ok(Array.from({ length: n }, (_, i) => rec[2 * i]).every((w) => w === SENTINEL), `step ${s}: nothing else in ids is written`);
    }

    // The adjust state the drawer left for a next step is the host's bias + RepetitionPenalty.
    specs.forEach((sp, i) => {
      const [row, off, count, out, mask] = jobs.subarray(i * JOB_WORDS, (i + 1) * JOB_WORDS);
      assert.deepStrictEqual([row, out, mask], [logitsRow(i), i, 0xffffffff], `${sp.label}: job`);
      const f = new Float32Array(adjust.buffer);
      const got = new Map<number, number>();
      for (let j = 0; j < count; j++) got.set(adjust[2 * (off + j)], f[2 * (off + j) + 1]);
      const want = new Map<number, number>();
      const a = samplers[i].sampler.adjustments();
      if (a) a.rows.forEach((r, j) => want.set(r, a.deltas[j]));
      assert.deepStrictEqual([...got.keys()].sort((x, y) => x - y), [...want.keys()].sort((x, y) => x - y), `${sp.label}: adjusted rows`);
      for (const [r, d] of want) {
        const g = got.get(r)!;
        assert.ok(g === d || Math.abs(g - d) <= 1e-5 * Math.max(1, Math.abs(d)), `${sp.label}: delta of row ${r} is ${g}, host ${d}`);
      }
    });

    for (const b of [logits, source, ids, idsRecord, drawnBuf, hostLogits]) b.destroy();
    reducer.dispose();
    hostReducer.dispose();
    drawer.dispose();
    return { expected, notTop1 };
  }

  /** Logits of one row over the steps: a fixed base plus peaks near the top, with a little noise each step. */
  function peaked(V: number, seed: number, opts: { peaks?: number; spread?: number; noise?: number; tieTo?: number } = {}) {
    const rnd = seeded(seed);
    const base = Float32Array.from({ length: V }, () => (rnd() - 0.5) * 6);
    const peaks = opts.peaks ?? 12;
    for (let k = 0; k < peaks; k++) base[10 + 37 * k] = 6 - (opts.spread ?? 0.3) * k;
    return (step: number) => {
      const r = seeded(seed * 1000 + step + 1);
      const x = Float32Array.from(base, (v) => v + (r() - 0.5) * (opts.noise ?? 0.4));
      // Ties: values rounded to a coarse grid, so many rows share each value (the top's order is by lower row).
      if (opts.tieTo) for (let j = 0; j < V; j++) x[j] = Math.round(x[j] * opts.tieTo) / opts.tieTo;
      return x;
    };
  }

  it('draws the rows the host draws, step after step, with penalties evolving on the GPU (V = TOP_SLICE + 77: two slices, the last short)', async () => {
    const V = TOP_SLICE + 77;
    const steps = 6;
    const specs: Spec[] = [
      { label: 'greedy', sampler: { temperature: 0, presencePenalty: 0, frequencyPenalty: 0 }, logits: peaked(V, 1) },
      {
        label: 'greedy, penalties, earlier draws',
        sampler: { temperature: 0, presencePenalty: 0.5, frequencyPenalty: 0.3, penaltyDecay: 0.9 },
        prior: [47, 47, 84],
        logits: peaked(V, 2, { noise: 0.05 }),
      },
      { label: 'T 1, top_k 40, top_p 0.9, penalties', sampler: { temperature: 1, topK: 40, topP: 0.9, presencePenalty: 0.3, frequencyPenalty: 0.3 }, logits: peaked(V, 3) },
      { label: 'T 0.3, top_k 256, top_p 1', sampler: { temperature: 0.3, topK: 256, topP: 1, presencePenalty: 0, frequencyPenalty: 0 }, logits: peaked(V, 4, { spread: 0.05 }) },
      { label: 'T 2, top_k 1, presence only', sampler: { temperature: 2, topK: 1, topP: 0.9, presencePenalty: 0.2, frequencyPenalty: 0, penaltyDecay: 1 }, logits: peaked(V, 5) },
      {
        label: 'T 1, top_k 40, top_p 1, bias',
        sampler: { temperature: 1, topK: 40, topP: 1, presencePenalty: 0.4, frequencyPenalty: 0.8, penaltyDecay: 0.95, logitBias: { 20: 3, 10: -Infinity, 47: 1.5 } },
        logits: peaked(V, 6, { spread: 0.1 }),
      },
      {
        label: 'greedy, a biased row drawn (presence, then frequency)',
        sampler: { temperature: 0, presencePenalty: 1, frequencyPenalty: 20, penaltyDecay: 0.99, logitBias: { 3000: 12, 10: -Infinity } },
        logits: peaked(V, 7, { noise: 0.01 }),
      },
      { label: 'all -inf', sampler: { temperature: 1, topK: 40, topP: 0.9, presencePenalty: 0.3 }, logits: () => new Float32Array(V).fill(-Infinity) },
      { label: 'greedy, ties, decay 0', sampler: { temperature: 0, presencePenalty: 0.5, frequencyPenalty: 0.5, penaltyDecay: 0 }, logits: peaked(V, 9, { tieTo: 1, spread: 0.2 }) },
      { label: 'T 1, top_k 256, top_p 0.9, ties', sampler: { temperature: 1, topK: 256, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 }, logits: peaked(V, 10, { tieTo: 2, spread: 0.5 }) },
      { label: 'T 2, top_k 256, top_p 0.5', sampler: { temperature: 2, topK: 256, topP: 0.5, presencePenalty: 0, frequencyPenalty: 0 }, logits: peaked(V, 12, { peaks: 40, spread: 0.02 }) },
      { label: 'T 1.5, top_k 3, top_p 1', sampler: { temperature: 1.5, topK: 3, topP: 1, presencePenalty: 0, frequencyPenalty: 0 }, logits: peaked(V, 13, { peaks: 40, spread: 0.02 }) },
      { label: 'T 1, top_k 256, top_p 0.1', sampler: { temperature: 1, topK: 256, topP: 0.1, presencePenalty: 0.1, frequencyPenalty: 0.1 }, logits: peaked(V, 11, { spread: 0.02 }) },
    ];
    const { expected, notTop1 } = await compare(V, specs, steps, 5);
    const column = (label: string) => expected.map((e) => e[specs.findIndex((s) => s.label === label)]);
    assert.ok(notTop1 >= 5, `nucleus drew a row other than the best only ${notTop1} times`);
    assert.ok(new Set(column('greedy, penalties, earlier draws')).size > 1, 'penalties move the greedy draw');
    assert.deepStrictEqual(column('all -inf'), new Array(steps).fill(-1));
    const biased = column('greedy, a biased row drawn (presence, then frequency)');
    assert.deepStrictEqual(biased.slice(0, 2), [3000, 3000], 'the biased row is drawn, and again after the presence penalty (1) only');
    assert.ok(!biased.slice(2).includes(3000), 'then the frequency penalty (20) pushes it out');
    assert.ok(!column('T 1, top_k 40, top_p 1, bias').includes(10), 'a row biased to -inf is never drawn');
  });

  it('draws as the host does over a 65,536-row vocabulary', async () => {
    const V = 65536;
    const specs: Spec[] = [
      {
        label: 'T 0.8, top_k 128, top_p 0.95, bias, penalties',
        sampler: { temperature: 0.8, topK: 128, topP: 0.95, presencePenalty: 0.3, frequencyPenalty: 0.3, logitBias: { 65535: 2, 10: -1 } },
        logits: peaked(V, 21, { spread: 0.1 }),
      },
      { label: 'greedy, bias at the last row', sampler: { temperature: 0, presencePenalty: 10, frequencyPenalty: 0.3, logitBias: { 65535: 12 } }, logits: peaked(V, 22, { spread: 1 }) },
    ];
    const { expected } = await compare(V, specs, 3, 9);
    assert.deepStrictEqual(expected.map((e) => e[1]).slice(0, 2), [65535, 10], 'the biased last row, then (its presence penalty 10) the best peak');
  });

  it('draws as the host does with every lane count, after hundreds of penalized rows (ai00\'s default sampler)', async () => {
    const V = TOP_SLICE + 77;
    // 300 distinct rows drawn before: 300 penalty pairs a row, more than the lanes of a workgroup take in one pass.
    const prior = Array.from({ length: 300 }, (_, j) => (j * 37 + 11) % V);
    const specs: Spec[] = [
      { label: 'ai00 default, 300 penalized', sampler: { temperature: 1, topK: 128, topP: 0.5, presencePenalty: 0.3, frequencyPenalty: 0.3 }, prior, logits: peaked(V, 31, { spread: 0.05 }) },
      { label: 'greedy, 300 penalized, one of them on top', sampler: { temperature: 0, presencePenalty: 0.5, frequencyPenalty: 0.5, penaltyDecay: 0.9 }, prior: [10, ...prior], logits: peaked(V, 32, { noise: 0.02 }) },
      { label: 'T 0.7, top_k 256, top_p 1, 300 penalized', sampler: { temperature: 0.7, topK: 256, topP: 1, presencePenalty: 0.2, frequencyPenalty: 0.1 }, prior, logits: peaked(V, 33, { peaks: 60, spread: 0.02 }) },
    ];
    const runs: number[][][] = [];
    for (const lanes of [1, 64, 256] as const) runs.push((await compare(V, specs, 5, 17, lanes)).expected);
    // compare() checked each run against the host; the host is the same for all, so the lane counts agree too.
    assert.deepStrictEqual(runs[1], runs[0]);
    assert.deepStrictEqual(runs[2], runs[0]);
  });

  it('RWKV_DRAW_LANES: 1, 32, 64, 128 or 256, unset 64; anything else is refused by name', () => {
    assert.strictEqual(drawLanesFrom(undefined), 64);
    assert.strictEqual(drawLanesFrom('1'), 1);
    assert.strictEqual(drawLanesFrom('256'), 256);
    for (const bad of ['0', '48', 'all']) assert.throws(() => drawLanesFrom(bad), /RWKV_DRAW_LANES=/);
  });

  it('refuses what it cannot draw, with messages that say why', () => {
    const { device } = gpu;
    const V = TOP_SLICE + 77;
    const logits = createBuffer(device, 'draw-logits', 2 * V * 4, storage());
    const ids = createBuffer(device, 'draw-ids', 16, storage());
    const reducer = new TopLogitsReducer(device, V, 2, logits);
    const drawer = new TopDrawer(device, reducer, ids, 2, 3);
    const row = (o: Partial<DrawRow> = {}): DrawRow => ({
      logitsRow: 0, idsAt: 0, temperature: 1, topK: 40, topP: 0.9, presence: 0, frequency: 0, decay: 1,
      bias: { rows: new Int32Array(0), values: new Float32Array(0) },
      penalties: { rows: new Int32Array(0), values: new Float32Array(0) },
      ...o,
    });
    const u = (k: number) => new Float32Array(k).fill(0.5);
    assert.throws(() => drawer.encode(device.createCommandEncoder()), /nothing prepared/);
    assert.throws(() => drawer.prepare([row({ topK: 0 })], u(1), 1), /row 0: topK must be an integer in 1\.\.256 to draw from the top, got 0/);
    assert.throws(() => drawer.prepare([row(), row({ topK: TOP_CAPACITY + 1 })], u(2), 1), /row 1: topK must be an integer in 1\.\.256 .* got 257/);
    assert.throws(() => drawer.prepare([row(), row()], u(5), 3), /5 uniforms for 3 steps of 2 rows; expected 6/);
    assert.throws(() => drawer.prepare([row()], u(4), 4), /steps must be an integer in 1\.\.3, got 4/);
    assert.throws(() => drawer.prepare([row()], u(0), 0), /steps must be an integer in 1\.\.3, got 0/);
    assert.throws(() => drawer.prepare([row(), row(), row()], u(3), 1), /3 rows; between 1 and 2/);
    assert.throws(() => drawer.prepare([row()], Float32Array.of(1), 1), /uniform 0 is 1, not in \[0, 1\)/);
    assert.throws(() => drawer.prepare([row({ temperature: -1 })], u(1), 1), /temperature must be a finite number >= 0/);
    assert.throws(() => drawer.prepare([row({ topP: 0 })], u(1), 1), /topP must be in \(0, 1\]/);
    assert.throws(() => drawer.prepare([row({ decay: 1.5 })], u(1), 1), /decay must be in \[0, 1\]/);
    assert.throws(() => drawer.prepare([row({ presence: NaN })], u(1), 1), /penalties must be finite/);
    assert.throws(() => drawer.prepare([row({ idsAt: 4 })], u(1), 1), /idsAt 4 is outside the ids buffer/);
    assert.throws(() => drawer.prepare([row({ bias: { rows: Int32Array.of(V), values: Float32Array.of(1) } })], u(1), 1), new RegExp(`bias row ${V} is outside the vocabulary 0\\.\\.${V - 1}`));
    assert.throws(() => drawer.prepare([row({ penalties: { rows: Int32Array.of(3, 3), values: Float32Array.of(1, 1) } })], u(1), 1), /penalties row 3 appears twice/);
    assert.throws(() => drawer.prepare([row({ bias: { rows: Int32Array.of(3), values: Float32Array.of(Infinity) } })], u(1), 1), /bias value for row 3 is Infinity/);
    // Greedy ignores topK; a prepared call takes exactly its steps.
    drawer.prepare([row({ temperature: 0, topK: 0 })], u(1), 1);
    const enc = device.createCommandEncoder();
    drawer.encode(enc);
    assert.throws(() => drawer.encode(enc), /all 1 prepared steps are encoded/);
    device.queue.submit([enc.finish()]);
    drawer.dispose();
    reducer.dispose();
    logits.destroy();
    ids.destroy();
  });
});
