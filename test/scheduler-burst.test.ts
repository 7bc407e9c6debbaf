// A burst of requests submitted together (a flow running one template over many items) against the step policy:
// one step carries chunks of several prompts within the token budget, chunks end at marked boundaries, prompts
// are served first come first served, and the pacer, which protects decoding slots from prompts that came after
// their requests, does not hold a burst back behind its own first members. Steps take time in proportion to their
// tokens here, so the pacer sees chunk steps cost more than decode steps, as on a GPU.

import * as assert from 'assert';
import type { EngineConfig, GenerateEvent } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import type { SlotJob } from '../engine/types';
import { byteTokenizer, FakeBackend } from './fake-backend';

type Stop = Extract<GenerateEvent, { type: 'stop' }>;

/** The fake model, with each run() taking 2 ms plus `msPerToken` for every token it carries; counts state loads. */
class TimedFake extends FakeBackend {
  writes = 0;
  copies = 0;
  reads = 0;

  constructor(
    slots: number,
    private readonly msPerToken: number,
  ) {
    super({ slots });
  }

  override async run(jobs: SlotJob[]): Promise<(Float32Array | null)[]> {
    const tokens = jobs.reduce((n, j) => n + j.tokens.length, 0);
    await new Promise((r) => setTimeout(r, 2 + tokens * this.msPerToken));
    return super.run(jobs) as Promise<(Float32Array | null)[]>;
  }

  override writeState(slot: number, state: Float32Array): void {
    this.writes++;
    super.writeState(slot, state);
  }

  override readState(slot: number): Promise<Float32Array> {
    this.reads++;
    return super.readState(slot);
  }

  override copyState(from: number, to: number): void {
    this.copies++;
    super.copyState(from, to);
  }
}

const greedy = { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, logitBias: { 0: -Infinity } };

function makeEngine(slots: number, config: EngineConfig, msPerToken = 0.3) {
  const fake = new TimedFake(slots, msPerToken);
  const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config, cacheMinTokens: 16, compileConstraint: null });
  return { fake, engine };
}

async function generate(engine: RwkvEngine, prompt: string, maxTokens: number, extra: { sharedPrefix?: number; signal?: AbortSignal } = {}) {
  const events: GenerateEvent[] = [];
  const { signal, ...req } = extra;
  for await (const e of engine.generate({ prompt, maxTokens, sampler: greedy, ...req }, signal ? { signal } : {})) events.push(e);
  const start = events.find((e) => e.type === 'start') as { slot?: number; cachedTokens: number };
  const stop = events[events.length - 1] as Stop;
  assert.strictEqual(stop.type, 'stop');
  return { tokens: events.flatMap((e) => (e.type === 'delta' ? e.tokens : [])), cached: start.cachedTokens, stop };
}

/** Greedy tokens of each prompt run alone on a fresh engine (one slot, one prompt, nothing to batch with). */
async function alone(prompts: string[], maxTokens: number): Promise<number[][]> {
  const out: number[][] = [];
  for (const p of prompts) {
    const engine = new RwkvEngine({ backend: new FakeBackend({ slots: 1 }), tokenizer: byteTokenizer, config: { prefixReuse: false }, compileConstraint: null });
    out.push((await generate(engine, p, maxTokens)).tokens);
    await engine.close();
  }
  return out;
}

const chunkTokensOf = (call: SlotJob[]) => call.filter((j) => j.tokens.length > 1).reduce((n, j) => n + j.tokens.length, 0);
const decodesIn = (call: SlotJob[]) => call.filter((j) => j.tokens.length === 1).length;

/** Ten different ~40-character item prompts. */
const items = Array.from({ length: 10 }, (_, i) => `Item ${i}: ${'abcdefghij'.slice(i)} ships to ${'klmnopqrst'.slice(0, 10 - i)} today.`);

describe('scheduler: a burst of prompts submitted together', function () {
  this.timeout(60000);

  it('carries chunks of several prompts a step within the budget, with the tokens each prompt gives alone', async () => {
    const { engine, fake } = makeEngine(16, { chunkSize: 24, prefillChunkSize: 24 });
    const first = generate(engine, 'go', 40);
    // The rest come once the first one decodes, so they prefill beside it within chunkSize.
    while (!fake.calls.some((c) => decodesIn(c) > 0)) await new Promise((r) => setImmediate(r));
    const seen = fake.calls.length;
    const short = ['ab1', 'cd2x', 'ef3', 'gh4yy', 'ij5', 'kl6', 'mn7zz', 'op8', 'qr9w', 'st0'];
    const results = await Promise.all(short.map((p) => generate(engine, p, 6)));
    await first;
    const later = fake.calls.slice(seen).filter((c) => chunkTokensOf(c) > 0);
    assert.ok(later.length > 0);
    for (const c of later) if (decodesIn(c) > 0) assert.ok(chunkTokensOf(c) <= 24, `a step beside decoding carried ${chunkTokensOf(c)} prompt tokens`);
    const most = Math.max(...later.map((c) => c.filter((j) => j.tokens.length > 1).length));
    // 38 prompt tokens against a 24-token budget: the ten prompts go in two or three steps, several a step.
    assert.ok(most >= 5, `at most ${most} prompts' chunks went in one step`);
    assert.ok(later.length <= 3, `the ten short prompts took ${later.length} steps`);
    assert.deepStrictEqual(
      results.map((r) => r.tokens),
      await alone(short, 6),
    );
    await engine.close();
  });

  it('does not pace a burst behind its own first member: every step carries chunks until its prompts are in', async () => {
    const { engine, fake } = makeEngine(8, { chunkSize: 16, prefillChunkSize: 16 });
    // One short prompt decodes after the first step; seven 60-token prompts need several chunks beside it.
    const prompts = ['go', ...items.slice(0, 7).map((p) => p + ' More text.'.repeat(2))];
    const results = await Promise.all(prompts.map((p, i) => generate(engine, p, i === 0 ? 60 : 4)));
    const firstDecode = fake.calls.findIndex((c) => decodesIn(c) > 0);
    let lastChunk = -1;
    fake.calls.forEach((c, i) => {
      if (chunkTokensOf(c) > 0) lastChunk = i;
    });
    assert.ok(firstDecode >= 0 && lastChunk > firstDecode + 3, `the burst's prompts should need several steps beside decoding (${firstDecode}, ${lastChunk})`);
    const held = fake.calls.slice(firstDecode, lastChunk + 1).filter((c) => chunkTokensOf(c) === 0).length;
    assert.strictEqual(held, 0, `${held} steps decoded while prompts of the same burst waited`);
    for (const c of fake.calls.slice(firstDecode, lastChunk + 1)) assert.ok(chunkTokensOf(c) <= 16, 'over the chunk budget beside decoding');
    assert.deepStrictEqual(
      results.map((r) => r.tokens),
      await alone(prompts, 4).then((a) => a.map((t, i) => (i === 0 ? results[0].tokens : t))),
    );
    await engine.close();
  });

  it('still paces a prompt that arrives while slots decode', async () => {
    const { engine, fake } = makeEngine(2, { chunkSize: 16, prefillChunkSize: 16 });
    const decoding = generate(engine, 'go', 600);
    // Decode-only steps first: the pacer's reference speed.
    while (fake.calls.filter((c) => decodesIn(c) > 0).length < 10) await new Promise((r) => setTimeout(r, 5));
    const seen = fake.calls.length;
    await generate(engine, 'z'.repeat(160), 2);
    const during = fake.calls.slice(seen);
    const chunkSteps = during.filter((c) => chunkTokensOf(c) > 0);
    const lastChunk = during.lastIndexOf(chunkSteps[chunkSteps.length - 1]);
    const decodeOnly = during.slice(0, lastChunk).filter((c) => chunkTokensOf(c) === 0).length;
    // Each 16-token chunk step costs ~3x a decode step: the account spaces the chunks out with decode-only steps.
    assert.ok(chunkSteps.length >= 9, `${chunkSteps.length} chunk steps`);
    assert.ok(decodeOnly >= chunkSteps.length, `only ${decodeOnly} decode-only steps between ${chunkSteps.length} chunks: not paced`);
    await decoding;
    await engine.close();
  });

  it('paces a prompt behind a request that came in an earlier step, though that one was still prefilling', async () => {
    const { engine, fake } = makeEngine(2, { chunkSize: 16, prefillChunkSize: 16 });
    const earlier = generate(engine, 'q'.repeat(64), 600); // four 16-token steps before it decodes
    while (engine.stats.steps < 1) await new Promise((r) => setImmediate(r));
    assert.ok(!fake.calls.some((c) => decodesIn(c) > 0), 'the earlier request decoded before the later one came');
    const seen = fake.calls.length;
    await generate(engine, 'z'.repeat(200), 2);
    const during = fake.calls.slice(seen);
    const firstDecode = during.findIndex((c) => decodesIn(c) > 0);
    let lastChunk = -1;
    during.forEach((c, i) => {
      if (chunkTokensOf(c) > 0 && decodesIn(c) > 0) lastChunk = i;
    });
    const beside = during.slice(firstDecode, lastChunk + 1);
    const chunkSteps = beside.filter((c) => chunkTokensOf(c) > 0).length;
    const decodeOnly = beside.length - chunkSteps;
    assert.ok(chunkSteps >= 5, `${chunkSteps} chunk steps beside decoding`);
    assert.ok(decodeOnly >= chunkSteps, `only ${decodeOnly} decode-only steps between ${chunkSteps} chunks: the earlier request was not protected`);
    await earlier;
    await engine.close();
  });

  it('serves the prompts of a burst first come first served within the budget, so none waits behind later ones', async () => {
    const { engine, fake } = makeEngine(8, { chunkSize: 16, prefillChunkSize: 16 });
    const prompts = ['go', ...Array.from({ length: 5 }, (_, i) => String.fromCharCode(97 + i).repeat(40))];
    const started: number[] = [];
    const results = await Promise.all(
      prompts.map(async (p, i) => {
        const r = await generate(engine, p, i === 0 ? 40 : 2);
        started.push(i);
        return r;
      }),
    );
    // Which slot carries which prompt: the first token of each job identifies it (all its tokens are one letter).
    const firstStepOf = new Map<number, number>();
    const lastStepOf = new Map<number, number>();
    fake.calls.forEach((c, i) => {
      for (const j of c) {
        if (j.tokens.length < 2) continue;
        const letter = j.tokens[0];
        if (!firstStepOf.has(letter)) firstStepOf.set(letter, i);
        lastStepOf.set(letter, i);
      }
    });
    const letters = prompts.slice(1).map((p) => byteTokenizer.encode(p)[0]);
    // First come first served: each prompt's prefill ends no later than the next one's.
    for (let k = 1; k < letters.length; k++) assert.ok(lastStepOf.get(letters[k - 1])! <= lastStepOf.get(letters[k])!, `prompt ${k} finished its prefill after prompt ${k + 1}`);
    // No starvation: every prompt's prefill ends within the steps its burst's tokens need (200 tokens, 16 a step).
    const firstDecode = fake.calls.findIndex((c) => decodesIn(c) > 0);
    for (const l of letters) assert.ok(lastStepOf.get(l)! <= firstDecode + Math.ceil(200 / 16) + 1, `a prompt waited until step ${lastStepOf.get(l)}`);
    for (const r of results.slice(1)) assert.strictEqual(r.stop.completionTokens, 2);
    assert.strictEqual(started.length, prompts.length);
    await engine.close();
  });

  it('ends chunks at a marked boundary, admits every prompt waiting for that checkpoint in one step, and does not pace them', async () => {
    const { engine, fake } = makeEngine(8, { chunkSize: 16, prefillChunkSize: 16 });
    const instruction = 'Answer every item below in one short, polite line of text. '.repeat(2); // 118 characters = tokens
    const prompts = items.slice(0, 6).map((i) => instruction + i);
    const results = await Promise.all(prompts.map((p, k) => generate(engine, p, k === 0 ? 30 : 4, { sharedPrefix: instruction.length })));
    // The first prompt's chunks: 16-token ones that stop at 120, the instruction's end.
    const slot0 = fake.calls.flatMap((c) => c.filter((j) => j.tokens.length > 1 && j.slot === fake.calls[0][0].slot)).map((j) => j.tokens.length);
    let fed = 0;
    const ends: number[] = [];
    for (const n of slot0) ends.push((fed += n));
    assert.ok(ends.includes(instruction.length), `no chunk of the first prompt ended at ${instruction.length}: ${ends.join(',')}`);
    assert.strictEqual(results[0].cached, 0);
    for (const r of results.slice(1)) assert.ok(r.cached >= instruction.length, `a waiting prompt resumed at ${r.cached}, not past the instruction`);
    // The five that waited for the checkpoint start together: their first chunks go in one step.
    const waiterSlots = new Set<number>();
    const firstChunkStep = new Map<number, number>();
    fake.calls.forEach((c, i) => {
      for (const j of c) {
        if (j.tokens.length > 1 && j.slot !== fake.calls[0][0].slot && !firstChunkStep.has(j.slot)) firstChunkStep.set(j.slot, i), waiterSlots.add(j.slot);
      }
    });
    assert.strictEqual(waiterSlots.size, 5);
    const firstSteps = [...firstChunkStep.values()];
    assert.ok(new Set(firstSteps).size <= 2, `the waiting prompts started in steps ${firstSteps.join(',')}`);
    const from = Math.min(...firstSteps);
    let lastChunk = from;
    fake.calls.forEach((c, i) => {
      if (i >= from && chunkTokensOf(c) > 0) lastChunk = i;
    });
    const held = fake.calls.slice(from, lastChunk + 1).filter((c) => chunkTokensOf(c) === 0).length;
    assert.strictEqual(held, 0, `${held} steps decoded only while the waiting prompts had chunks left`);
    assert.deepStrictEqual(
      results.slice(1).map((r) => r.tokens),
      await alone(prompts.slice(1), 4),
    );
    await engine.close();
  });

  it('uploads a checkpoint its waiting prompts share once, and copies it between slots on the GPU for the others', async () => {
    const { engine, fake } = makeEngine(8, { chunkSize: 16, prefillChunkSize: 16 });
    const instruction = 'Answer every item below in one short, polite line of text. '.repeat(2);
    const burst = items.slice(0, 6).map((i) => instruction + i);
    const results = await Promise.all(burst.map((p) => generate(engine, p, 4, { sharedPrefix: instruction.length })));
    // The five waiting prompts resume from one checkpoint: one upload, four slot-to-slot copies.
    assert.strictEqual(fake.writes, 1, `${fake.writes} uploads`);
    assert.strictEqual(fake.copies, 4, `${fake.copies} copies`);
    // Later prompts resume from the cache again; a slot that has run a step since is no source for a copy.
    fake.writes = fake.copies = 0;
    const later = items.slice(6, 9).map((i) => instruction + i);
    const more = [];
    for (const p of later) more.push(await generate(engine, p, 4, { sharedPrefix: instruction.length }));
    assert.strictEqual(fake.copies, 0);
    assert.ok(fake.writes >= later.length);
    assert.deepStrictEqual(
      [...results, ...more].map((r) => r.tokens),
      await alone([...burst, ...later], 4),
    );
    await engine.close();
  });

  it('lets the rest of a burst finish with their own tokens when one of them is cancelled mid-prefill', async () => {
    const { engine, fake } = makeEngine(8, { chunkSize: 16, prefillChunkSize: 16 });
    const prompts = ['go', ...items.slice(0, 5).map((p) => p.repeat(2))];
    const abort = new AbortController();
    const runs = prompts.map((p, i) => generate(engine, p, i === 0 ? 40 : 4, i === 2 ? { signal: abort.signal } : {}).catch((e: Error) => e));
    while (!fake.calls.some((c) => decodesIn(c) > 0)) await new Promise((r) => setImmediate(r));
    abort.abort();
    const results = await Promise.all(runs);
    assert.ok(results[2] instanceof Error || (results[2] as { stop: Stop }).stop.reason === 'abort', 'the cancelled prompt was not stopped');
    const kept = [1, 3, 4, 5];
    assert.deepStrictEqual(
      kept.map((i) => (results[i] as { tokens: number[] }).tokens),
      await alone(kept.map((i) => prompts[i]), 4),
    );
    await engine.close();
  });

  it('keeps no whole-prompt entry (and reads back no state) for a prompt that computed few tokens past its cached prefix', async () => {
    // cacheMinTokens 16: a 5-token item after a cached instruction is not worth a state, nor its read-back. Eight
    // slots, so that no slot is reused here (a reused slot's retained state is kept: another read).
    const { engine, fake } = makeEngine(8, { chunkSize: 16, prefillChunkSize: 16 });
    const instruction = 'Answer every item below in one short, polite line of text. '.repeat(2);
    await generate(engine, instruction + 'first item, cached whole', 2, { sharedPrefix: instruction.length });
    const short = ['A: x1', 'B: y2', 'C: z3', 'D: w4'].map((i) => instruction + i);
    fake.reads = 0;
    for (const p of short) assert.strictEqual((await generate(engine, p, 2, { sharedPrefix: instruction.length })).cached, instruction.length);
    assert.strictEqual(fake.reads, 0, `${fake.reads} state read-backs for prompts only 5 tokens past the cached instruction`);
    // Repeated, a short prompt resumes from the instruction again (its own 5 tokens are computed again).
    assert.strictEqual((await generate(engine, short[0], 2, { sharedPrefix: instruction.length })).cached, instruction.length);
    // A prompt that computed at least cacheMinTokens past it is still kept whole, and resumes whole when repeated.
    const long = instruction + 'F: a longer item of text that is worth a state';
    await generate(engine, long, 2, { sharedPrefix: instruction.length });
    assert.ok(fake.reads >= 1);
    assert.strictEqual((await generate(engine, long, 2, { sharedPrefix: instruction.length })).cached, byteTokenizer.encode(long).length);
    await engine.close();
  });
});
