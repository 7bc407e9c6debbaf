// Shared-prefix state reuse (issue #14 item 1): checkpoints at prefill chunk boundaries and at a caller-marked
// boundary, resumed at token granularity, and prompts arriving together that prefill their shared part once.
import * as assert from 'assert';
import type { EngineConfig, GenerateEvent } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { RequestCancelledError } from '../engine/errors';
import { PrefixCache } from '../engine/prefix-cache';
import { RequestTimeoutError } from '../engine/request-deadline';
import { prepareGenerate } from '../nodes/shared/generate-request';
import { byteTokenizer, FakeBackend } from './fake-backend';

type Stop = Extract<GenerateEvent, { type: 'stop' }>;
const greedy = { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, logitBias: { 0: -Infinity } };

function makeEngine(slots: number, config: EngineConfig = {}) {
  const fake = new FakeBackend({ slots });
  const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config: { chunkSize: 8, prefillChunkSize: 8, ...config }, cacheMinTokens: 16, compileConstraint: null });
  return { fake, engine };
}

async function run(engine: RwkvEngine, prompt: string, sharedPrefix?: number) {
  const events: GenerateEvent[] = [];
  for await (const e of engine.generate({ prompt, maxTokens: 5, sampler: greedy, ...(sharedPrefix === undefined ? {} : { sharedPrefix }) })) events.push(e);
  const start = events.find((e) => e.type === 'start') as { cachedTokens: number };
  const stop = events[events.length - 1] as Stop;
  return { cached: start.cachedTokens, tokens: events.flatMap((e) => (e.type === 'delta' ? e.tokens : [])), text: stop.text };
}

/** The same prompts, each on a fresh engine: what reuse must not change. */
async function cold(prompts: string[]) {
  const out: number[][] = [];
  for (const p of prompts) {
    const { engine } = makeEngine(1, { prefixReuse: false });
    out.push((await run(engine, p)).tokens);
    await engine.close();
  }
  return out;
}

/** Wait until the checkpoint reads the engine started have landed in the cache. */
const settle = () => new Promise((r) => setTimeout(r, 20));

const INSTRUCTION = 'Classify the sentiment of the text below as good or bad. '; // 57 characters
const inputs = ['I loved it', 'Awful, really', 'Not bad at all', 'Meh, fine I guess'];

describe('prefix reuse: checkpoints', () => {
  it('resumes a prompt that shares only part of an earlier one from the last chunk-boundary checkpoint', async () => {
    const { engine } = makeEngine(1);
    const a = INSTRUCTION + inputs[0];
    const b = INSTRUCTION + inputs[1];
    await run(engine, a);
    await settle();
    const second = await run(engine, b);
    // Shared: 57 tokens; the chunk boundaries at 16, 24, ..., 56 were kept: the last partial chunk is re-fed.
    assert.strictEqual(second.cached, 56);
    assert.deepStrictEqual([second.tokens], await cold([b]));
    await engine.close();
  });

  it('resumes at the exact end of a caller-marked shared prefix', async () => {
    const { engine } = makeEngine(1);
    await run(engine, INSTRUCTION + inputs[0], INSTRUCTION.length);
    await settle();
    const second = await run(engine, INSTRUCTION + inputs[2], INSTRUCTION.length);
    assert.strictEqual(second.cached, INSTRUCTION.length);
    // The byte tokenizer splits nowhere else, so the marked prompt's output equals the unmarked cold run.
    assert.deepStrictEqual([second.tokens], await cold([INSTRUCTION + inputs[2]]));
    await engine.close();
  });

  it('keeps no checkpoints with prefixReuse off (only whole prompts are cached)', async () => {
    const { engine } = makeEngine(1, { prefixReuse: false });
    await run(engine, INSTRUCTION + inputs[0], INSTRUCTION.length);
    await settle();
    assert.strictEqual((await run(engine, INSTRUCTION + inputs[1], INSTRUCTION.length)).cached, 0);
    await engine.close();
  });

  it('refuses a sharedPrefix outside the prompt', () => {
    const { engine } = makeEngine(1);
    assert.throws(() => engine.generate({ prompt: 'abc', sharedPrefix: 4 }), /sharedPrefix must be an integer in \[0, 3\]/);
    assert.throws(() => engine.generate({ prompt: 'abc', sharedPrefix: 1.5 }), /sharedPrefix/);
    return engine.close();
  });
});

describe('prefix reuse: chat prompts mark their system turn', () => {
  it('sets sharedPrefix at the end of the system turn, so chats with the same system prompt resume after it', async () => {
    const { request } = prepareGenerate({ messages: [{ role: 'user', content: 'Hi\n\nthere' }], system: 'Be brief.' });
    assert.strictEqual(request.prompt.slice(0, request.sharedPrefix), 'System: Be brief.\n\n');
    assert.strictEqual(prepareGenerate({ messages: [{ role: 'user', content: 'Hi' }] }).request.sharedPrefix, undefined);
    assert.strictEqual(prepareGenerate({ prompt: 'System: x\n\nUser: y' }).request.sharedPrefix, undefined);
    const { engine } = makeEngine(1);
    const first = prepareGenerate({ messages: [{ role: 'user', content: 'first question' }], system: INSTRUCTION }).request;
    await run(engine, first.prompt, first.sharedPrefix);
    const second = prepareGenerate({ messages: [{ role: 'user', content: 'another one' }], system: INSTRUCTION }).request;
    await settle();
    assert.strictEqual((await run(engine, second.prompt, second.sharedPrefix)).cached, second.sharedPrefix);
    await engine.close();
  });
});

describe('prefix reuse: the cache keeps used entries before speculative checkpoints', () => {
  const f32 = (n: number) => new Float32Array(n);
  const entry = 4 * 4; // 4-float state, no logits

  it('evicts a checkpoint no prompt has used before any older entry', () => {
    const c = new PrefixCache(entry * 2);
    c.insert([1], f32(4), null);
    c.insert([2], f32(4), null, { speculative: true });
    c.insert([3], f32(4), null);
    assert.ok(c.has([1]), 'the older whole-prompt entry stays');
    assert.ok(!c.has([2]), 'the unused checkpoint went first');
    assert.ok(c.has([3]));
  });

  it('treats a checkpoint a prompt used like any other entry', () => {
    const c = new PrefixCache(entry * 2);
    c.insert([2], f32(4), null, { speculative: true });
    c.insert([1], f32(4), null);
    assert.strictEqual(c.lookup([2, 9])!.length, 1); // used: now the most recently used entry
    c.insert([3], f32(4), null);
    assert.ok(c.has([2]) && !c.has([1]) && c.has([3]));
    assert.strictEqual(c.bytes, entry * 2);
  });
});

describe('prefix reuse: in-flight de-duplication', () => {
  it('prefills the shared instruction of prompts that arrive together once', async () => {
    const prompts = inputs.map((i) => INSTRUCTION + i);
    const { engine } = makeEngine(4);
    const results = await Promise.all(prompts.map((p) => run(engine, p, INSTRUCTION.length)));
    const prefill = engine.stats.chunkTokens;
    // The first prompt whole, the others only their own input.
    const expected = prompts[0].length + inputs.slice(1).reduce((n, i) => n + i.length, 0);
    assert.strictEqual(prefill, expected, `prefilled ${prefill} prompt tokens`);
    assert.deepStrictEqual(results.map((r) => r.cached), [0, 57, 57, 57]);
    assert.ok(engine.stats.sharedWaits >= 3);
    assert.deepStrictEqual(results.map((r) => r.tokens), await cold(prompts));
    await engine.close();
  });

  it('prefills identical prompts sent together once (the last token re-fed)', async () => {
    const prompt = INSTRUCTION + inputs[3];
    const { engine } = makeEngine(4);
    const results = await Promise.all([0, 1, 2, 3].map(() => run(engine, prompt)));
    assert.strictEqual(engine.stats.chunkTokens, prompt.length + 3);
    const [ref] = await cold([prompt]);
    for (const r of results) assert.deepStrictEqual(r.tokens, ref);
    await engine.close();
  });

  it('a prompt extending one prefilling now resumes from its end, without waiting for its generation', async () => {
    const leader = INSTRUCTION + inputs[0];
    const follower = leader + ' and more';
    const { engine } = makeEngine(2);
    const order: string[] = [];
    const generate = (prompt: string, maxTokens: number, name: string) =>
      (async () => {
        let cached = -1;
        for await (const e of engine.generate({ prompt, maxTokens, sampler: greedy })) if (e.type === 'start') cached = e.cachedTokens;
        order.push(name);
        return cached;
      })();
    const [, cached] = await Promise.all([generate(leader, 60, 'leader'), generate(follower, 2, 'follower')]);
    assert.strictEqual(cached, leader.length);
    assert.deepStrictEqual(order, ['follower', 'leader']);
    await engine.close();
  });

  it('lets the waiting prompts go when the one computing their prefix is cancelled', async () => {
    const prompts = inputs.map((i) => INSTRUCTION + i);
    const { engine } = makeEngine(4);
    const leader = new AbortController();
    const first = (async () => {
      for await (const e of engine.generate({ prompt: prompts[0], maxTokens: 5, sampler: greedy }, { signal: leader.signal })) {
        if (e.type === 'prefill') leader.abort();
      }
    })().catch((e) => e);
    const rest = Promise.all(prompts.slice(1).map((p) => run(engine, p)));
    await first;
    const results = await rest;
    assert.deepStrictEqual(results.map((r) => r.tokens), await cold(prompts.slice(1)));
    await engine.close();
  });
});

describe('stop reason of a cancelled request', () => {
  it("says why the caller's signal ended it: 'cancelled', 'disconnected', 'closed', else 'abort'", async () => {

    const { engine } = makeEngine(2);
    const causes: unknown[] = [];
    for (const reason of [new RequestCancelledError('x', 'cancelled'), new RequestCancelledError('x', 'disconnected'), new RequestCancelledError('x', 'closed'), undefined]) {
      const controller = new AbortController();
      let stop: Stop | undefined;
      for await (const e of engine.generate({ prompt: 'hello there', maxTokens: 50, sampler: greedy }, { signal: controller.signal })) {
        if (e.type === 'delta') controller.abort(reason);
        if (e.type === 'stop') stop = e;
      }
      assert.strictEqual(stop!.reason, 'abort');
      causes.push(stop!.cause);
    }
    assert.deepStrictEqual(causes, ['cancelled', 'disconnected', 'closed', 'abort']);
    await engine.close();
  });

  it("past the deadline fails with RequestTimeoutError carrying the output so far (stop reason 'timeout')", async () => {
    const fake = new FakeBackend({ slots: 1, delayMs: 2 });
    const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config: { maxTokensLimit: 100_000, requestTimeoutMs: 200 }, compileConstraint: null });
    let text = '';
    const error = await (async () => {
      for await (const e of engine.generate({ prompt: 'hello', maxTokens: 100_000, sampler: greedy })) if (e.type === 'delta') text += e.text;
    })().then(() => null, (e: unknown) => e);
    assert.ok(error instanceof RequestTimeoutError, String(error));
    assert.strictEqual(error.partial?.reason, 'timeout');
    assert.strictEqual(error.partial.text, text);
    assert.strictEqual(error.partial.promptTokens, 5);
    assert.ok(error.partial.completionTokens >= 0);
    await engine.close();
  });
});
