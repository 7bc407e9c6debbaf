// Output 'top' (shaders/top_logits.wgsl): logits rows reduced on the GPU to their largest entries and
// normalizer. Checked against a CPU reference on synthetic rows built to hit the radix select's corners
// (crowded exponents, ties at the cut, -inf, NaN, fewer finite values than the capacity), then on the
// real backend against the full row, and through the engine: the same tokens as sampling the full row.

import * as assert from 'assert';
import * as path from 'path';
import type { GenerateEvent, GenerateRequest, SamplerOptions } from '../engine/api';
import { createBackend, type Backend } from '../engine/backend';
import { RwkvEngine } from '../engine/engine';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { createBuffer } from '../engine/gpu/kernel';
import { TOP_CAPACITY, TOP_SLICE, TopLogitsReducer } from '../engine/rwkv7/top-logits';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import { Candidates } from '../engine/samplers/probability';
import { pickNucleus } from '../engine/samplers/nucleus';
import { WorldTokenizer } from '../engine/tokenizer';
import type { Feed, SlotTask } from '../engine/slot-task';
import type { JobResult, LogitAdjust, SlotJob, TopLogits } from '../engine/types';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

/** The CPU meaning of a 'top' result: the capacity largest finite values after the adjustment. */
function reference(row: Float32Array, adjust?: LogitAdjust) {
  const x = Float32Array.from(row);
  if (adjust?.allowed) x.forEach((_, i) => ((adjust.allowed![i >>> 5] >>> (i & 31)) & 1 ? 0 : (x[i] = -Infinity)));
  if (adjust) adjust.rows.forEach((r, i) => (x[r] += adjust.deltas[i]));
  const finite = Array.from(x.keys()).filter((i) => x[i] > -Infinity);
  finite.sort((a, b) => x[b] - x[a] || a - b);
  const max = finite.length ? x[finite[0]] : -Infinity;
  let sum = 0;
  for (const i of finite) sum += Math.exp(x[i] - max);
  return { x, kept: finite.slice(0, TOP_CAPACITY), max, logZ: Math.log(sum), finite: finite.length };
}

/** The World tokenizer cut to the tiny golden model's 512 rows. */
const tinyTokenizer = () => WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe("output 'top': the CPU's reading of a result (TopLogitsReducer.parse)", () => {
  /** A result as the kernel writes it: count, max, sum, finite, then (row, value bits) pairs in any order. */
  function result(entries: [number, number][]): Uint32Array {
    const r = 4 + 2 * TOP_CAPACITY;
    const words = new Uint32Array(2 * r);
    words[r] = entries.length; // the second of two results, so the base offset is exercised
    new Float32Array(words.buffer)[r + 1] = 1;
    new Float32Array(words.buffer)[r + 2] = 2;
    words[r + 3] = entries.length;
    entries.forEach(([row, bits], j) => words.set([row, bits], r + 4 + 2 * j));
    return words;
  }
  const f32bits = (v: number) => new Uint32Array(Float32Array.of(v).buffer)[0];
  /** Order-preserving u32 of a float's bits (as the kernel and parse compare them). */
  const ordered = (bits: number) => (bits & 0x80000000 ? ~bits >>> 0 : (bits | 0x80000000) >>> 0);

  it('orders entries by value, largest first, ties by row: exact where values agree in all bits or only the top 24', () => {
    const rnd = seeded(11);
    for (let trial = 0; trial < 200; trial++) {
      const count = trial === 0 ? TOP_CAPACITY : 1 + Math.floor(rnd() * TOP_CAPACITY);
      const base = 1 + rnd() * 4;
      const entries: [number, number][] = [];
      const rows = new Set<number>();
      while (entries.length < count) {
        const row = Math.floor(rnd() * 65536);
        if (rows.has(row)) continue;
        rows.add(row);
        const pick = rnd();
        // Exact ties, values one ulp apart (same top 24 bits), ±0, -inf and NaN bits, and plain values.
        const bits =
          pick < 0.2 ? f32bits(base) :
          pick < 0.4 ? (f32bits(base) + Math.floor(rnd() * 200)) >>> 0 :
          pick < 0.45 ? f32bits(rnd() < 0.5 ? 0 : -0) :
          pick < 0.5 ? (rnd() < 0.5 ? f32bits(-Infinity) : 0x7fc00000 + Math.floor(rnd() * 1000)) :
          f32bits((rnd() - 0.5) * 20);
        entries.push([row, bits]);
      }
      const words = result(entries);
      const got = TopLogitsReducer.parse(words, 4 + 2 * TOP_CAPACITY, 1);
      const want = [...entries].sort((a, b) => ordered(b[1]) - ordered(a[1]) || a[0] - b[0]);
      assert.deepStrictEqual(Array.from(got.rows), want.map((e) => e[0]), `trial ${trial}`);
      assert.deepStrictEqual(Array.from(new Uint32Array(got.logits.buffer)), want.map((e) => e[1]), `trial ${trial}: the values' bits`);
      assert.strictEqual(got.max, 1);
      assert.strictEqual(got.logZ, Math.log(2));
    }
  });

  it('refuses a result longer than its capacity', () => {
    const words = new Uint32Array(4 + 2 * TOP_CAPACITY);
    words[0] = TOP_CAPACITY + 1;
    assert.throws(() => TopLogitsReducer.parse(words, 4 + 2 * TOP_CAPACITY, 0), /257 entries exceeds the 256/);
  });
});

describe("output 'top': logits reduced on the GPU", function () {
  this.timeout(300000);
  let gpu: GpuContext;

  before(async () => {
    gpu = await acquireGpu();
  });

  /** Reduce synthetic rows with the production kernel and parse them as the runtime does. */
  async function reduce(rows: Float32Array[], adjusts: (LogitAdjust | undefined)[], copies?: number): Promise<TopLogits[]> {
    const V = rows[0].length;
    const { device } = gpu;
    const logits = createBuffer(device, 'test-logits', rows.length * V * 4, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST);
    rows.forEach((r, i) => device.queue.writeBuffer(logits, i * V * 4, r));
    const reducer = new TopLogitsReducer(device, V, rows.length, logits, copies);
    adjusts.forEach((a, i) => reducer.check(a, i));
    const bytes = reducer.bytes(rows.length);
    const staging = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    // Written in reverse order, so result slots are not simply the row numbers.
    reducer.encode(enc, rows.map((_, i) => ({ logitsRow: i, adjust: adjusts[i], out: rows.length - 1 - i })));
    reducer.copyOut(enc, staging, 0, rows.length);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const words = new Uint32Array(staging.getMappedRange().slice(0));
    staging.destroy();
    logits.destroy();
    reducer.dispose();
    // The kernel sorts its candidates (best first, equal values by lower row), so parse takes them as they are.
    rows.forEach((_, i) => {
      const base = (rows.length - 1 - i) * reducer.stride;
      const f = new Float32Array(words.buffer);
      for (let j = 1; j < words[base]; j++) {
        const [a, b] = [f[base + 5 + 2 * (j - 1)], f[base + 5 + 2 * j]];
        const [ra, rb] = [words[base + 4 + 2 * (j - 1)], words[base + 4 + 2 * j]];
        assert.ok(a > b || (a === b && ra < rb) || (Object.is(a, 0) && Object.is(b, -0)), `row ${i}: kernel output ${j} out of order (${a}@${ra}, ${b}@${rb})`);
      }
    });
    return rows.map((_, i) => TopLogitsReducer.parse(words, reducer.stride, rows.length - 1 - i));
  }

  function assertMatches(got: TopLogits, row: Float32Array, adjust: LogitAdjust | undefined, label: string) {
    const ref = reference(row, adjust);
    assert.strictEqual(got.finite, ref.finite, `${label}: finite count`);
    assert.strictEqual(got.rows.length, Math.min(TOP_CAPACITY, ref.finite), `${label}: candidates`);
    // Values must be exactly the largest ones; among exact ties at the cut any subset is right.
    assert.deepStrictEqual(Array.from(got.logits), ref.kept.map((i) => ref.x[i]), `${label}: values`);
    got.rows.forEach((r, j) => assert.strictEqual(ref.x[r], got.logits[j], `${label}: row ${r} carries its own value`));
    assert.strictEqual(new Set(got.rows).size, got.rows.length, `${label}: rows distinct`);
    if (ref.finite > 0) {
      assert.strictEqual(got.max, ref.max, `${label}: max`);
      assert.ok(Math.abs(got.logZ - ref.logZ) < 1e-5 * Math.max(1, Math.abs(ref.logZ)), `${label}: logZ ${got.logZ} vs ${ref.logZ}`);
    } else {
      assert.strictEqual(got.max, -Infinity);
    }
  }

  for (const copies of [undefined, 3, 8]) it(`finds the largest entries and the normalizer on rows built to stress the radix select (${copies ?? 'default'} histogram copies)`, async () => {
    const V = 65536;
    const rnd = seeded(7);
    const rows: Float32Array[] = [];
    const adjusts: (LogitAdjust | undefined)[] = [];
    // 0: normal logits. 1: values crowded into one exponent (one digit holds everything).
    rows.push(Float32Array.from({ length: V }, () => (rnd() - 0.5) * 20));
    rows.push(Float32Array.from({ length: V }, () => 1 + rnd() * 1e-3));
    // 2: a flat row: every value tied, so the cut falls inside one value.
    rows.push(new Float32Array(V).fill(0.25));
    // 3: mostly -inf and NaN, only 100 finite values (fewer than the capacity), negatives and zeros among them.
    const sparse = new Float32Array(V).fill(-Infinity);
    for (let i = 0; i < V; i += 7) sparse[i] = NaN;
    for (let k = 0; k < 100; k++) sparse[(k * 613) % V | 1] = k % 3 === 0 ? -0 : k % 3 === 1 ? -k : k / 7;
    rows.push(sparse);
    // 4: ties exactly at the cut plus big and tiny magnitudes.
    const tied = Float32Array.from({ length: V }, (_, i) => (i % 1000 === 0 ? 3e30 : i % 3 === 0 ? -1e-30 : -50 - (i % 5)));
    rows.push(tied);
    // 5: normal logits with adjustments that move rows in and out of the top, one to -inf.
    rows.push(Float32Array.from({ length: V }, () => (rnd() - 0.5) * 8));
    for (let i = 0; i < 5; i++) adjusts[i] = undefined;
    const adjRows = Int32Array.from({ length: 500 }, (_, k) => (k * 131 + 17) % V);
    adjusts[5] = { rows: adjRows, deltas: Float32Array.from(adjRows, (_, k) => (k === 0 ? -Infinity : k % 2 ? 6 : -6)) };
    // 6, 7: a grammar's mask (a third of the rows, and only 40 rows: fewer than the capacity), with
    // adjustments on allowed and masked rows alike; 8: a mask that allows nothing.
    const bits = (allow: (i: number) => boolean) => {
      const b = new Uint32Array(V / 32);
      for (let i = 0; i < V; i++) if (allow(i)) b[i >>> 5] |= 1 << (i & 31);
      return b;
    };
    rows.push(Float32Array.from({ length: V }, () => (rnd() - 0.5) * 8));
    adjusts[6] = { ...adjusts[5], allowed: bits((i) => i % 3 === 1) };
    rows.push(Float32Array.from({ length: V }, () => (rnd() - 0.5) * 8));
    adjusts[7] = { rows: new Int32Array(0), deltas: new Float32Array(0), allowed: bits((i) => i % 1601 === 0) };
    rows.push(Float32Array.from({ length: V }, () => rnd()));
    adjusts[8] = { rows: Int32Array.of(5), deltas: Float32Array.of(1), allowed: bits(() => false) };
    const got = await reduce(rows, adjusts, copies);
    got.forEach((g, i) => assertMatches(g, rows[i], adjusts[i], `row ${i}`));
  });

  it('cuts rows into slices of TOP_SLICE (a short last one), and adjusts, masks and selects across their edges', async () => {
    const V = 3 * TOP_SLICE + 77;
    const rnd = seeded(11);
    const edges = [0, TOP_SLICE - 1, TOP_SLICE, 2 * TOP_SLICE - 1, 2 * TOP_SLICE, 3 * TOP_SLICE - 1, 3 * TOP_SLICE, V - 1];
    const rows: Float32Array[] = [];
    const adjusts: (LogitAdjust | undefined)[] = [];
    // 0: rising values: the CAP largest all in the last two slices, the short one whole.
    rows.push(Float32Array.from({ length: V }, (_, i) => i / 100));
    adjusts.push(undefined);
    // 1: normal values, the slices' edge rows lifted to the top or sunk.
    rows.push(Float32Array.from({ length: V }, () => (rnd() - 0.5) * 8));
    adjusts.push({ rows: Int32Array.from(edges), deltas: Float32Array.from(edges, (_, k) => (k % 2 ? 50 : -Infinity)) });
    // 2: a mask allowing 200 rows spread over every slice (fewer than the capacity), one of them adjusted.
    const allowed = new Uint32Array(Math.ceil(V / 32));
    for (let k = 0; k < 200; k++) {
      const r = (k * 61 + 5) % V;
      allowed[r >>> 5] |= 1 << (r & 31);
    }
    rows.push(Float32Array.from({ length: V }, () => rnd()));
    adjusts.push({ rows: Int32Array.of(5), deltas: Float32Array.of(3), allowed });
    // 3: every value tied but one per slice: the cut inside the ties of all slices at once.
    rows.push(Float32Array.from({ length: V }, (_, i) => (i % TOP_SLICE === 7 ? 2 : 1)));
    adjusts.push(undefined);
    const reducer = new TopLogitsReducer(gpu.device, V, 1, createBuffer(gpu.device, 'x', 4 * V, GPUBufferUsage.STORAGE));
    assert.strictEqual(reducer.slices, 4);
    reducer.dispose();
    const got = await reduce(rows, adjusts);
    got.forEach((g, i) => assertMatches(g, rows[i], adjusts[i], `row ${i}`));
  });

  it('returns every finite entry of a vocabulary smaller than the capacity', async () => {
    const rows = [Float32Array.from({ length: 100 }, (_, i) => Math.sin(i)), new Float32Array(100).fill(-Infinity)];
    const got = await reduce(rows, [undefined, undefined]);
    assertMatches(got[0], rows[0], undefined, 'small');
    assertMatches(got[1], rows[1], undefined, 'empty');
  });

  it('refuses malformed adjustments before anything runs', async () => {
    const reducer = new TopLogitsReducer(gpu.device, 100, 1, createBuffer(gpu.device, 'x', 400, GPUBufferUsage.STORAGE));
    assert.throws(() => reducer.check({ rows: Int32Array.of(1, 1), deltas: Float32Array.of(1, 2) }, 0), /row 1 appears twice/);
    assert.throws(() => reducer.check({ rows: Int32Array.of(100), deltas: Float32Array.of(1) }, 0), /outside the vocabulary/);
    assert.throws(() => reducer.check({ rows: Int32Array.of(3), deltas: Float32Array.of(NaN) }, 0), /delta for row 3/);
    assert.throws(() => reducer.check({ rows: Int32Array.of(3), deltas: Float32Array.of() }, 0), /1 rows but 0 deltas/);
    reducer.check({ rows: Int32Array.of(3, 4), deltas: Float32Array.of(-Infinity, 2) }, 0);
    assert.throws(() => reducer.check({ rows: Int32Array.of(), deltas: Float32Array.of(), allowed: new Uint32Array(3) }, 0), /allowed has 3 words; a bitset over 100 rows has 4/);
    reducer.dispose();
  });

  describe('on the backend (tiny golden model)', () => {
    const MODEL = path.join(GOLDEN, 'v7-tiny.st');
    const backends: Backend[] = [];
    before(function () {
      requireGolden(this, MODEL);
    });
    after(() => backends.forEach((b) => b.dispose()));

    it("gives the top of the same row 'last' gives, in a batch with other outputs", async () => {
      const be = await createBackend({ model: MODEL, slots: 3, precision: 'f32', gpu });
      backends.push(be);
      const prompt = [10, 20, 30, 40, 50];
      const adjust = { rows: Int32Array.of(5, 6, 7), deltas: Float32Array.of(3, -Infinity, -2) };
      const results = await be.run([
        { slot: 0, tokens: prompt, output: 'last' },
        { slot: 1, tokens: prompt, output: 'top', adjust },
        { slot: 2, tokens: [1, 2, 3], output: 'all' },
      ]);
      const full = results[0] as Float32Array;
      const top = results[1] as TopLogits;
      assert.strictEqual(top.kind, 'top');
      assert.ok(results[2] instanceof Float32Array && results[2].length === 3 * be.info.vocabSize);
      const ref = reference(full, adjust);
      assert.strictEqual(top.rows.length, TOP_CAPACITY);
      top.logits.forEach((v, j) => assert.ok(Math.abs(v - ref.x[top.rows[j]]) < 1e-5, `logit of row ${top.rows[j]}`));
      for (let j = 1; j < top.logits.length; j++) assert.ok(top.logits[j] <= top.logits[j - 1], 'best first');
      const kept = new Set(top.rows);
      const bestLeft = Math.max(...Array.from(ref.x).filter((_, i) => !kept.has(i)));
      assert.ok(bestLeft <= top.logits[top.logits.length - 1] + 1e-5, 'nothing left out is larger than what was kept');
      assert.ok(Math.abs(top.logZ - ref.logZ) < 1e-4);
      assert.ok(!top.rows.includes(6), 'a row biased to -inf is gone');
      await assert.rejects(be.run([{ slot: 0, tokens: [1], output: 'last', adjust }]), /adjust is for output 'top' only/);
      await assert.rejects(be.run([{ slot: 0, tokens: [1], output: 'top', adjust: { rows: Int32Array.of(512), deltas: Float32Array.of(1) } }]), /outside the vocabulary/);
    });

    it('samples the same tokens from the top as from the full row (greedy, seeded nucleus and mirostat)', async () => {
      const tokenizer = tinyTokenizer();
      const make = async (top: boolean) => {
        const backend = await createBackend({ model: MODEL, slots: 2, precision: 'f32', gpu });
        backends.push(backend);
        // Hiding the 'top' output makes the engine sample every full row on the CPU.
        if (!top) Object.defineProperty(backend, 'topCapacity', { value: 0 });
        return new RwkvEngine({ backend, tokenizer, config: { chunkSize: 16 }, cacheMinTokens: 1000, compileConstraint: null });
      };
      const samplers: SamplerOptions[] = [
        { temperature: 0, logitBias: { 0: -Infinity } },
        { seed: 11, temperature: 1.2, topP: 0.9, topK: 40, logitBias: { 0: -Infinity, 65: 2 } },
        { seed: 5, logitBias: { 0: -Infinity } },
        { kind: 'mirostat', seed: 2, logitBias: { 0: -Infinity } },
        // mu starts at 7 and may reach 14: steps alternate between the top and the full row.
        { kind: 'mirostat', seed: 4, mirostatTau: 3.5, mirostatEta: 0.5, logitBias: { 0: -Infinity } },
      ];
      const tokens = async (e: RwkvEngine) => {
        const out: number[][] = [];
        for (const sampler of samplers) {
          const events: GenerateEvent[] = [];
          for await (const ev of e.generate({ prompt: 'The quick brown fox', maxTokens: 24, sampler })) events.push(ev);
          out.push(events.flatMap((ev) => (ev.type === 'delta' ? ev.tokens : [])));
        }
        return out;
      };
      const [gpuTop, cpuFull] = [await make(true), await make(false)];
      const a = await tokens(gpuTop);
      const b = await tokens(cpuFull);
      assert.ok(a.every((t) => t.length === 24), 'every request ran its 24 tokens');
      assert.deepStrictEqual(a, b);
      await Promise.all([gpuTop.close(), cpuFull.close()]);
    });

    it('the GPU masks what the grammar forbids: same output as masking the full row on the CPU', async () => {
      const tokenizer = tinyTokenizer();
      const backends: Backend[] = [];
      let maskedSteps = 0;
      const make = async (top: boolean) => {
        const backend = await createBackend({ model: MODEL, slots: 3, precision: 'f32', gpu });
        backends.push(backend);
        if (!top) Object.defineProperty(backend, 'topCapacity', { value: 0 });
        const run = backend.run.bind(backend) as (jobs: SlotJob[]) => Promise<JobResult[]>;
        backend.run = ((jobs: SlotJob[]) => {
          maskedSteps += jobs.filter((j) => j.output === 'top' && j.adjust?.allowed).length;
          return run(jobs);
        }) as typeof backend.run;
        return new RwkvEngine({ backend, tokenizer, config: { chunkSize: 16 }, cacheMinTokens: 1000 });
      };
      const schema = {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' }, tags: { type: 'array', items: { enum: ['a', 'bc'] } } },
        required: ['name', 'age'],
        additionalProperties: false,
      };
      const requests: GenerateRequest[] = [
        { prompt: 'Record:', maxTokens: 48, jsonSchema: schema, sampler: { temperature: 0 } },
        { prompt: 'Record:', maxTokens: 48, jsonSchema: schema, sampler: { seed: 3, temperature: 1.5, topP: 0.95, topK: 200 } },
        { prompt: 'Answer:', maxTokens: 24, grammar: 'root ::= ("yes" | "no") " because " [a-z ]+ "."', sampler: { seed: 9, temperature: 2 } },
      ];
      const run = async (e: RwkvEngine) =>
        Promise.all(
          requests.map(async (req) => {
            const events: GenerateEvent[] = [];
            for await (const ev of e.generate(req)) events.push(ev);
            return events[events.length - 1] as Extract<GenerateEvent, { type: 'stop' }>;
          }),
        );
      const [gpuTop, cpuFull] = [await make(true), await make(false)];
      const stepsBefore = gpuTop.stats.steps;
      const a = await run(gpuTop);
      const b = await run(cpuFull);
      assert.deepStrictEqual(a.map((s) => s.text), b.map((s) => s.text));
      assert.ok(a[0].json !== undefined && typeof (a[0].json as { name: unknown }).name === 'string', 'conforming JSON');
      assert.ok(/^(yes|no) because [a-z ]+\.$/.test(a[2].text) || a[2].reason === 'length', `grammar output: ${a[2].text}`);
      assert.ok(gpuTop.stats.steps > stepsBefore);
      assert.ok(maskedSteps >= 20, `only ${maskedSteps} decode steps were masked on the GPU`);
      await Promise.all([gpuTop.close(), cpuFull.close()]);
      for (const be of backends) be.dispose();
    });
  });

  describe('prefix cache after decoding from the top (tiny golden model)', () => {
    const MODEL = path.join(GOLDEN, 'v7-tiny.st');
    before(function () {
      requireGolden(this, MODEL);
    });

    it('an evicted slot that decoded from the top is cached without logits and serves longer prompts only', async () => {
      const tokenizer = tinyTokenizer();
      const backend = await createBackend({ model: MODEL, slots: 1, precision: 'f32', gpu });
      const e = new RwkvEngine({ backend, tokenizer, config: { chunkSize: 16 }, cacheMinTokens: 8, compileConstraint: null });
      const zero = (e as unknown as { states: { zero: SlotTask['initial'] } }).states.zero;
      /** Prefill `prompt`, then feed `decode` greedy tokens read from 'top' results; resolves with what the slot holds. */
      const run = (prompt: number[], decode: number) =>
        new Promise<{ cached: number; fed: number[] }>((resolve, reject) => {
          let cached = -1;
          const fed: number[] = [];
          const next = (row: number): Feed | null => {
            if (fed.length === decode) return resolve({ cached, fed }), null;
            fed.push(row);
            return { tokens: [row], output: 'top' };
          };
          e.scheduler.submit({
            initial: zero,
            prompt,
            cachePrompt: 'never',
            onStart: (i) => (cached = i.cachedTokens),
            onPrefilled: (l) => next(Array.from(l.keys()).reduce((a, b) => (l[b] > l[a] ? b : a), 1)),
            onFed: (r) => next((r as TopLogits).rows[0]),
            onAbort: () => reject(new Error('aborted')),
            onError: reject,
          });
        });
      const prompt = tokenizer.encode('A long enough prompt for the cache');
      const first = await run(prompt, 6);
      const held = [...prompt, ...first.fed];
      await run(tokenizer.encode('something else takes the only slot'), 1);
      const longer = await run([...held, 65], 0);
      assert.strictEqual(longer.cached, held.length, 'continues from the saved state of the evicted slot');
      await run(tokenizer.encode('and evict it again'), 1);
      const same = await run(held, 0);
      assert.ok(same.cached < held.length, 'an entry without logits cannot end a prompt');
      await e.close();
      backend.dispose();
    });
  });

  it('nucleus draws from a top stored best first are those from the same top in row order (the sort it skips)', () => {
    const rnd = seeded(23);
    for (let trial = 0; trial < 300; trial++) {
      const count = 1 + Math.floor(rnd() * TOP_CAPACITY);
      const rowsSet = new Set<number>();
      while (rowsSet.size < count) rowsSet.add(Math.floor(rnd() * 65536));
      const rows = Int32Array.from(rowsSet);
      // Best first, ties by lower row (as the kernel writes them); some exact ties, a spread of up to 40 nats.
      const values = Array.from({ length: count }, () => (rnd() < 0.2 ? 3 : 10 - rnd() * 40)).sort((a, b) => b - a);
      const entries = values.map((v, i) => [v, rows[i]] as [number, number]).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
      const top: TopLogits = {
        kind: 'top',
        rows: Int32Array.from(entries, (e) => e[1]),
        logits: Float32Array.from(entries, (e) => e[0]),
        max: entries[0][0],
        logZ: entries[0][0] > 0 ? 1 + rnd() * 5 : 0.5,
        finite: count + 100,
      };
      const byRow = new Candidates(65536);
      const bestFirst = new Candidates(65536);
      assert.strictEqual(byRow.fromTop(top, 'row'), bestFirst.fromTop(top, 'best'));
      assert.strictEqual(byRow.count, bestFirst.count);
      for (const [k, p, t] of [[1, 1, 1], [50, 0.9, 1], [256, 0.5, 0.7], [8, 1, 2], [128, 0.95, 0.3]]) {
        assert.deepStrictEqual(Array.from(bestFirst.mostProbable(k), (j) => bestFirst.rows[j]), Array.from(byRow.mostProbable(k), (j) => byRow.rows[j]));
        for (const u of [0, rnd(), rnd(), 0.999999]) {
          assert.strictEqual(pickNucleus(bestFirst, k, p, t, u), pickNucleus(byRow, k, p, t, u), `trial ${trial}, top_k ${k}, top_p ${p}, T ${t}, u ${u}`);
        }
      }
    }
  });

  it('the sampler uses the top only where it is exact', () => {
    const s = (o: object) => new TokenSampler(resolveSamplerOptions(o), 1000, (id) => id);
    assert.ok(s({}).canSampleTop(256), 'ai00 defaults: nucleus, top_k 128');
    assert.ok(s({ temperature: 0, topK: 0 }).canSampleTop(256), 'greedy');
    assert.ok(!s({ topK: 0 }).canSampleTop(256), 'no top_k limit');
    assert.ok(!s({ topK: 300 }).canSampleTop(256), 'top_k beyond the capacity');
    assert.ok(!s({ kind: 'typical' }).canSampleTop(256));
    assert.ok(s({ kind: 'mirostat' }).canSampleTop(256), 'mirostat, ai00 tau 3: mu starts at 6, at most 2^6 + 1 candidates');
    assert.ok(s({ kind: 'mirostat', mirostatTau: 2.5 }).canSampleTop(33), 'mu starts at 5: 33 candidates at most');
    assert.ok(!s({ kind: 'mirostat', mirostatTau: 2.5 }).canSampleTop(32));
    assert.ok(!s({ kind: 'mirostat', mirostatTau: 4.5 }).canSampleTop(256), 'mu starts at 9: 513 candidates');
    assert.ok(!s({ temperature: 0 }).canSampleTop(0), 'a backend without the output');
    const withBias = s({ logitBias: { 3: -Infinity, 4: 1 }, presencePenalty: 0.5, frequencyPenalty: 0.25 });
    withBias.sample(Float32Array.from({ length: 1000 }, (_, i) => (i === 4 ? 10 : 0)));
    const adj = withBias.adjustments()!;
    const byRow = new Map(Array.from(adj.rows, (r, i) => [r, adj.deltas[i]]));
    assert.deepStrictEqual([...byRow.keys()].sort(), [3, 4]);
    assert.strictEqual(byRow.get(3), -Infinity);
    assert.ok(Math.abs(byRow.get(4)! - (1 - 0.5)) < 1e-6, 'bias plus the penalty of the token just drawn');
    assert.strictEqual(s({ presencePenalty: 0, frequencyPenalty: 0 }).adjustments(), undefined);
  });
});
