// The scheduler on the real WebGPU backend (lavapipe in CI) with the tiny golden RWKV-7 model
// (vocab 512: the World tokenizer is restricted to ids below 512, which include all byte tokens).

import * as assert from 'assert';
import * as path from 'path';
import type { GenerateEvent } from '../engine/api';
import { createBackend, type Backend } from '../engine/backend';
import { RwkvEngine } from '../engine/engine';
import type { SlotTask } from '../engine/slot-task';
import { WorldTokenizer } from '../engine/tokenizer';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';
import { worstRelL2 } from './metrics';
import { prefillLogits } from './prefill-probe';

const MODEL = path.join(GOLDEN, 'v7-tiny.st');
const greedy = { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, logitBias: { 0: -Infinity } };
type Stop = Extract<GenerateEvent, { type: 'stop' }>;

async function run(it: AsyncIterable<GenerateEvent>) {
  const events: GenerateEvent[] = [];
  for await (const e of it) events.push(e);
  return { stop: events[events.length - 1] as Stop, tokens: events.flatMap((e) => (e.type === 'delta' ? e.tokens : [])), events };
}

describe('scheduler on the WebGPU backend (tiny golden model)', function () {
  this.timeout(300000);
  const tokenizer = WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));
  const backends: Backend[] = [];
  const engine = async (slots: number, chunkSize = 16, cacheMinTokens = 8) => {
    // 'gpu' by name: on a software adapter (lavapipe in CI) 'auto' picks the CPU backend, which this suite is not about.
    const backend = await createBackend({ model: MODEL, slots, precision: 'f32', device: 'gpu' });
    backends.push(backend);
    assert.ok(!/^CPU/.test(backend.adapterName), `runs on ${backend.adapterName}`);
    return new RwkvEngine({ backend, tokenizer, config: { chunkSize }, cacheMinTokens, compileConstraint: null });
  };
  before(function () {
    requireGolden(this, MODEL);
  });

  const prompts = ['Hello there', 'The capital of France is', 'a', 'Once upon a time, in a land far, far away, there lived'];

  it('gives the same greedy tokens batched as each request alone', async () => {
    const solo = await engine(1, 64);
    const alone: number[][] = [];
    for (const prompt of prompts) alone.push((await run(solo.generate({ prompt, maxTokens: 8, sampler: greedy }))).tokens);
    const batch = await engine(4, 8);
    const together = await Promise.all(prompts.map((prompt) => run(batch.generate({ prompt, maxTokens: 8, sampler: greedy }))));
    assert.deepStrictEqual(together.map((t) => t.tokens), alone);
    await Promise.all([solo.close(), batch.close()]);
  });

  it('a prefix-cache hit gives the same logits as a cold run', async () => {
    const e = await engine(1, 16, 8);
    const ids = (t: string) => tokenizer.encode(t);
    const logitsAfter = (prompt: number[]) => prefillLogits(e, prompt);
    const base = ids('System: you are a helpful assistant who answers briefly.\n');
    const full = [...base, ...ids('User: hi')];
    const cold = await engine(1, 16, 10_000);
    const coldFull = (await prefillLogits(cold, full)).logits;
    await logitsAfter(base); // cold, cached at the end of prefill
    await logitsAfter(ids('something unrelated to evict the slot')); // slot now holds other tokens
    const hit = await logitsAfter(full);
    assert.strictEqual(hit.cached, base.length);
    const err = worstRelL2(hit.logits, coldFull, coldFull.length);
    assert.ok(err < 1e-5, `relative error ${err}`);
    await Promise.all([e.close(), cold.close()]);
  });

  it('choose ranks first the choice whose tokens the model predicts highest', async () => {
    const e = await engine(3);
    const prompt = 'The capital of France is';
    const logits = await new Promise<Float32Array>((resolve, reject) => {
      e.scheduler.submit({
        initial: (e as unknown as { states: { zero: SlotTask['initial'] } }).states.zero,
        prompt: tokenizer.encode(prompt),
        onPrefilled: (l) => (resolve(l.slice()), null),
        onFed: () => null,
        onAbort: () => reject(new Error('aborted')),
        onError: reject,
      });
    });
    // Single printable ASCII characters are single byte tokens (World id = byte + 1).
    const choices = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
    let best = 0;
    for (let i = 1; i < choices.length; i++) if (logits[33 + i] > logits[33 + best]) best = i;
    const r = await e.choose(prompt, choices);
    assert.strictEqual(r.ranking[0].choice, choices[best]);
    assert.strictEqual(r.ranking.length, 95);
    await e.close();
  });

  it('completes 200 concurrent requests on 4 slots with nothing lost', async () => {
    const e = await engine(4, 16);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => run(e.generate({ prompt: `Request number ${i}:`, maxTokens: 2, sampler: { ...greedy, temperature: 1, seed: i } }))),
    );
    for (const r of results) assert.deepStrictEqual([r.stop.reason, r.stop.completionTokens], ["length", 2]);
    assert.strictEqual(e.scheduler.active + e.scheduler.queued, 0);
    await e.close();
  });

  it('cancellation mid-prefill and mid-decode frees the slot', async () => {
    const e = await engine(1, 4);
    const ac = new AbortController();
    for await (const ev of e.generate({ prompt: 'word '.repeat(30), maxTokens: 4, sampler: greedy }, { signal: ac.signal })) {
      if (ev.type === 'prefill') ac.abort();
    }
    assert.strictEqual(e.scheduler.active, 0);
    const ac2 = new AbortController();
    let stop: Stop | undefined;
    for await (const ev of e.generate({ prompt: 'hi', maxTokens: 50, sampler: greedy }, { signal: ac2.signal })) {
      if (ev.type === 'delta') ac2.abort();
      if (ev.type === 'stop') stop = ev;
    }
    assert.strictEqual(stop!.reason, 'abort');
    const after = await run(e.generate({ prompt: 'ok', maxTokens: 2, sampler: greedy }));
    assert.strictEqual(after.stop.completionTokens, 2);
    await e.close();
  });
});
