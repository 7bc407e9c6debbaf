import * as assert from 'assert';
import type { SlotJob } from '../engine/types';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { EngineConfig, GenerateEvent, GenerateRequest } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { QueueFullError, RequestError, StateFileError } from '../engine/errors';
import { byteTokenizer, FakeBackend, type FakeBackendOptions } from './fake-backend';
import { prefillLogits } from './prefill-probe';

type Stop = Extract<GenerateEvent, { type: 'stop' }>;

function makeEngine(backend: Partial<FakeBackendOptions> & { slots: number }, config: EngineConfig = {}, cacheMinTokens = 16) {
  const fake = new FakeBackend(backend);
  const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config, cacheMinTokens, compileConstraint: null });
  return { fake, engine };
}

async function collect(it: AsyncIterable<GenerateEvent>): Promise<{ events: GenerateEvent[]; stop: Stop; tokens: number[] }> {
  const events: GenerateEvent[] = [];
  for await (const e of it) events.push(e);
  const stop = events[events.length - 1] as Stop;
  assert.strictEqual(stop.type, 'stop');
  const tokens = events.flatMap((e) => (e.type === 'delta' ? e.tokens : []));
  return { events, stop, tokens };
}

const greedy = { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, logitBias: { 0: -Infinity } };
const prompts = [
  'Once upon a time',
  'x',
  'The quick brown fox jumps over the lazy dog, again and again and again.',
  'RWKV is an RNN with transformer-level performance',
  'ab',
  'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.',
];

describe('scheduler: continuous batching', function () {
  it('gives the same greedy tokens batched (chunked prefill, 4 slots) as each request alone', async () => {
    const alone: number[][] = [];
    for (const prompt of prompts) {
      const { engine } = makeEngine({ slots: 1 }, { chunkSize: 1000 });
      alone.push((await collect(engine.generate({ prompt, maxTokens: 12, sampler: greedy }))).tokens);
      await engine.close();
    }
    const { engine, fake } = makeEngine({ slots: 4 }, { chunkSize: 7, prefillChunkSize: 7 });
    const batched = await Promise.all(prompts.map((prompt) => collect(engine.generate({ prompt, maxTokens: 12, sampler: greedy }))));
    assert.deepStrictEqual(batched.map((b) => b.tokens), alone);
    for (const b of batched) assert.strictEqual(b.stop.completionTokens, 12);
    assert.ok(fake.calls.some((c) => c.length > 1), 'requests shared backend calls');
    // Continuous batching: never more than one chunk's worth of prompt tokens (chunkSize, shared by the prompts
    // waiting) in a step with decoding slots.
    for (const call of fake.calls) {
      const chunkTokens = call.filter((j) => j.tokens.length > 1).reduce((n, j) => n + j.tokens.length, 0);
      const decodes = call.filter((j) => j.tokens.length === 1).length;
      if (decodes > 0) assert.ok(chunkTokens <= 7, `step with ${decodes} decodes had ${chunkTokens} prompt tokens`);
      for (const j of call) assert.ok(j.tokens.length <= 7);
    }
    await engine.close();
  });

  it('keeps decoding other slots while a long prompt is prefilled', async () => {
    const { engine, fake } = makeEngine({ slots: 2 }, { chunkSize: 8 });
    // The first request decodes until the long prompt is done (then it is cancelled): however the pacer spaces the
    // chunks on a loaded machine, the decoding slot stays busy for the whole prefill, so every chunk is chunkSize.
    const first = engine.generate({ prompt: 'hi', maxTokens: 4000, sampler: greedy })[Symbol.asyncIterator]();
    await first.next(); // start
    await first.next(); // first delta: slot 0 is decoding
    let longDone = false;
    const long = collect(engine.generate({ prompt: 'y'.repeat(200), maxTokens: 2, sampler: greedy })).finally(() => (longDone = true));
    const rest = (async () => {
      while (!longDone) if ((await first.next()).done) break;
      await first.return?.(undefined);
    })();
    await Promise.all([long, rest]);
    const isChunk = (c: SlotJob[]) => c.some((j) => j.tokens.length > 1);
    const prefillSteps = fake.calls.filter(isChunk);
    assert.ok(prefillSteps.length >= 200 / 8 - 1);
    // From the first chunk of the long prompt to its last, every step advanced the decoding slot
    // (chunks may be paced to every few steps, never the other way round).
    const from = fake.calls.findIndex((c) => c.some((j) => j.tokens.length === 8)); // the long prompt's first chunk
    const isDecode = (c: SlotJob[]) => c.some((j) => j.tokens.length === 1);
    const lastChunk = fake.calls.length - 1 - [...fake.calls].reverse().findIndex(isChunk);
    const lastDecode = fake.calls.length - 1 - [...fake.calls].reverse().findIndex(isDecode);
    const window = fake.calls.slice(from, Math.min(lastChunk, lastDecode) + 1);
    const withDecode = window.filter(isDecode);
    assert.ok(withDecode.length >= 20, `decode advanced during prefill in only ${withDecode.length} steps`);
    assert.strictEqual(withDecode.length, window.length, 'a step during the prefill left the decoding slot waiting');
    await engine.close();
  });

  it('prefills in larger chunks while no slot decodes, and in chunkSize ones while one does', async () => {
    const { engine, fake } = makeEngine({ slots: 2 }, { chunkSize: 8, prefillChunkSize: 32 });
    await collect(engine.generate({ prompt: 'a'.repeat(100), maxTokens: 1, sampler: greedy }));
    const alone = fake.calls.flatMap((c) => c.map((j) => j.tokens.length)).filter((n) => n > 1);
    assert.deepStrictEqual(alone.slice(0, 3), [32, 32, 32], 'alone: 32-token chunks');
    fake.calls.length = 0;
    const first = engine.generate({ prompt: 'hi', maxTokens: 30, sampler: greedy })[Symbol.asyncIterator]();
    await first.next();
    await first.next(); // decoding now
    const long = collect(engine.generate({ prompt: 'b'.repeat(100), maxTokens: 1, sampler: greedy }));
    for (;;) if ((await first.next()).done) break;
    await long;
    const beside = fake.calls.filter((c) => c.some((j) => j.tokens.length === 1) && c.some((j) => j.tokens.length > 1));
    assert.ok(beside.length > 0);
    for (const c of beside) for (const j of c) assert.ok(j.tokens.length <= 8, `a ${j.tokens.length}-token chunk beside a decoding slot`);
    await engine.close();
  });

  it('runs 200 concurrent requests on 4 slots with nothing lost', async function () {
    this.timeout(60000);
    const { engine } = makeEngine({ slots: 4 }, { chunkSize: 16 });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => collect(engine.generate({ prompt: `request ${i}:`, maxTokens: 5, sampler: { ...greedy } }))),
    );
    assert.strictEqual(results.length, 200);
    for (const r of results) {
      assert.strictEqual(r.stop.reason, 'length');
      assert.strictEqual(r.stop.completionTokens, 5);
    }
    assert.strictEqual(engine.scheduler.active, 0);
    assert.strictEqual(engine.scheduler.queued, 0);
    await engine.close();
  });

  it('reports queue position and refuses requests over the queue bound', async () => {
    const { engine } = makeEngine({ slots: 1, delayMs: 5 }, { maxQueue: 1 });
    const a = engine.generate({ prompt: 'a', maxTokens: 3, sampler: greedy })[Symbol.asyncIterator]();
    const b = engine.generate({ prompt: 'b', maxTokens: 3, sampler: greedy })[Symbol.asyncIterator]();
    const c = engine.generate({ prompt: 'c', maxTokens: 3, sampler: greedy })[Symbol.asyncIterator]();
    const pa = a.next();
    const pb = b.next();
    await assert.rejects(c.next(), QueueFullError);
    assert.strictEqual((await pb).value!.type, 'queued');
    await pa;
    for (const it of [a, b]) while (!(await it.next()).done);
    await engine.close();
  });
});

describe('scheduler: cancellation', () => {
  it('abort mid-prefill frees the slot at the next step', async () => {
    const { engine } = makeEngine({ slots: 1, delayMs: 2 }, { chunkSize: 4, prefillChunkSize: 4 });
    const ac = new AbortController();
    const events: GenerateEvent[] = [];
    for await (const e of engine.generate({ prompt: 'z'.repeat(100), maxTokens: 5, sampler: greedy }, { signal: ac.signal })) {
      events.push(e);
      if (e.type === 'prefill' && e.done >= 8) ac.abort();
    }
    const stop = events[events.length - 1] as Stop;
    assert.strictEqual(stop.reason, 'abort');
    assert.strictEqual(stop.completionTokens, 0);
    assert.ok((events.filter((e) => e.type === 'prefill').pop() as { done: number }).done < 100);
    assert.strictEqual(engine.scheduler.active, 0);
    const next = await collect(engine.generate({ prompt: 'after', maxTokens: 3, sampler: greedy }));
    assert.strictEqual(next.stop.completionTokens, 3);
    await engine.close();
  });

  it('abort mid-decode (or leaving the loop) frees the slot', async () => {
    const { engine } = makeEngine({ slots: 1 });
    const ac = new AbortController();
    let deltas = 0;
    let stop: Stop | undefined;
    for await (const e of engine.generate({ prompt: 'count', maxTokens: 100, sampler: greedy }, { signal: ac.signal })) {
      if (e.type === 'delta' && ++deltas === 3) ac.abort();
      if (e.type === 'stop') stop = e;
    }
    assert.strictEqual(stop!.reason, 'abort');
    assert.ok(stop!.completionTokens >= 3 && stop!.completionTokens <= 4);
    for await (const e of engine.generate({ prompt: 'again', maxTokens: 100, sampler: greedy })) if (e.type === 'delta') break;
    await new Promise((r) => setTimeout(r, 10));
    assert.strictEqual(engine.scheduler.active, 0);
    assert.strictEqual((await collect(engine.generate({ prompt: 'ok', maxTokens: 2, sampler: greedy }))).stop.reason, 'length');
    await engine.close();
  });

  it('abort while queued removes the request without touching the running one', async () => {
    const { engine } = makeEngine({ slots: 1, delayMs: 2 });
    const running = collect(engine.generate({ prompt: 'first', maxTokens: 10, sampler: greedy }));
    const ac = new AbortController();
    const queued = collect(engine.generate({ prompt: 'second', maxTokens: 10, sampler: greedy }, { signal: ac.signal }));
    await new Promise((r) => setTimeout(r, 5));
    ac.abort();
    assert.strictEqual((await queued).stop.reason, 'abort');
    assert.strictEqual((await running).stop.completionTokens, 10);
    await engine.close();
  });
});

describe('scheduler: stop strings, max tokens, end of text', () => {
  // Script: after the prompt, spell "Hello, World!STOP and more" one byte token at a time.
  const text = Buffer.from('Hello, Wörld!STOP and more');
  const spell = (promptLength: number) => (_last: number, fed: number) => {
    const i = fed - promptLength;
    return i >= 0 && i < text.length ? text[i] + 1 : null;
  };

  it('matches a stop string split across tokens and never emits any of it', async () => {
    const prompt = 'say:';
    const { engine } = makeEngine({ slots: 2, script: spell(prompt.length) });
    const { events, stop } = await collect(engine.generate({ prompt, maxTokens: 50, stop: ['P and', 'ld!S'], sampler: greedy }));
    assert.strictEqual(stop.reason, 'stop');
    assert.strictEqual(stop.text, 'Hello, Wör');
    const deltas = events.filter((e) => e.type === 'delta').map((e) => (e as { text: string }).text);
    assert.strictEqual(deltas.join(''), 'Hello, Wör');
    for (const d of deltas) assert.ok(!d.includes('\ufffd'), 'a split UTF-8 character was emitted half');
    await engine.close();
  });

  it('ends at maxTokens, and on end of text', async () => {
    const { engine } = makeEngine({ slots: 1, script: (_l, fed) => (fed >= 6 ? 0 : null) });
    const a = await collect(engine.generate({ prompt: 'abc', maxTokens: 2, sampler: { temperature: 0 } }));
    assert.deepStrictEqual([a.stop.reason, a.stop.completionTokens], ['length', 2]);
    const b = await collect(engine.generate({ prompt: 'abc', maxTokens: 20, sampler: { temperature: 0 } }));
    assert.deepStrictEqual([b.stop.reason, b.stop.completionTokens], ['eos', 3]);
    assert.ok(b.stop.timing.totalMs >= b.stop.timing.decodeMs);
    await engine.close();
  });

  it('seeded sampling reproduces the same text across engines', async () => {
    const run = async (seed: number) => {
      const { engine } = makeEngine({ slots: 2 });
      const r = await collect(engine.generate({ prompt: 'seed test', maxTokens: 20, sampler: { seed, temperature: 1, topP: 1, logitBias: { 0: -Infinity } } }));
      await engine.close();
      return r.tokens;
    };
    assert.deepStrictEqual(await run(11), await run(11));
    assert.notDeepStrictEqual(await run(11), await run(12));
  });
});

describe('scheduler: prefix cache and slot reuse', () => {
  const logitsAfter = prefillLogits;

  it('a cache hit gives identical logits to a cold run, including partial hits', async () => {
    const { engine, fake } = makeEngine({ slots: 2 }, { chunkSize: 8 }, 16);
    const base = Array.from({ length: 40 }, (_, i) => 1 + ((i * 37) % 250));
    const longer = [...base, 5, 6, 7];
    const cold = await logitsAfter(engine, base);
    assert.strictEqual(cold.cached, 0);
    assert.deepStrictEqual(cold.logits, fake.referenceLogits(base));
    // Served from the retained slot or the cache: either way no token is recomputed.
    const hit = await logitsAfter(engine, base);
    assert.strictEqual(hit.cached, 40);
    assert.deepStrictEqual(hit.logits, cold.logits);
    const partial = await logitsAfter(engine, longer);
    assert.strictEqual(partial.cached, 40);
    assert.deepStrictEqual(partial.logits, fake.referenceLogits(longer));
    await engine.close();
  });

  it('serves a repeated prompt from the cache even after its slot was reused', async () => {
    const { engine, fake } = makeEngine({ slots: 1 }, { chunkSize: 8 }, 16);
    const prompt = 'a fairly long system prompt that should be cached by the engine';
    const cold = await collect(engine.generate({ prompt, maxTokens: 4, sampler: greedy }));
    await collect(engine.generate({ prompt: 'something else entirely', maxTokens: 4, sampler: greedy }));
    const callsBefore = fake.calls.length;
    const warm = await collect(engine.generate({ prompt, maxTokens: 4, sampler: greedy }));
    const start = warm.events.find((e) => e.type === 'start') as { cachedTokens: number; promptTokens: number };
    assert.strictEqual(start.cachedTokens, start.promptTokens);
    assert.deepStrictEqual(warm.tokens, cold.tokens);
    assert.strictEqual(fake.calls.length - callsBefore, 3, 'only the decode steps ran');
    await engine.close();
  });

  it('caches a prefilled prompt without holding up the steps after it', async () => {
    const { engine, fake } = makeEngine({ slots: 2 }, { chunkSize: 8 }, 16);
    // A slow state read, taken (as the GPU backend does, its calls being in order) before later steps run. It ends
    // once three steps ran during it, or after 2 s if none can: a fixed 30 ms read made this depend on the machine's
    // load (CI under load once saw only one step in it).
    let pendingReads = 0;
    let stepsDuringRead = 0;
    const read = fake.readState.bind(fake);
    fake.readState = async (slot: number) => {
      const state = read(slot);
      pendingReads++;
      const t0 = Date.now();
      while (stepsDuringRead < 3 && Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 5));
      pendingReads--;
      return state;
    };
    const run = fake.run.bind(fake);
    fake.run = ((jobs: SlotJob[]) => {
      if (pendingReads > 0) stepsDuringRead++;
      return run(jobs);
    }) as typeof fake.run;
    const prompt = 'a fairly long system prompt that should be cached by the engine';
    const cold = await collect(engine.generate({ prompt, maxTokens: 6, sampler: greedy }));
    assert.ok(stepsDuringRead >= 3, `decode steps waited for the cache insert (${stepsDuringRead} ran during it)`);
    while (pendingReads > 0) await new Promise((r) => setTimeout(r, 5));
    const warm = await collect(engine.generate({ prompt, maxTokens: 6, sampler: greedy }));
    const start = warm.events.find((e) => e.type === 'start') as { cachedTokens: number; promptTokens: number };
    assert.strictEqual(start.cachedTokens, start.promptTokens);
    assert.deepStrictEqual(warm.tokens, cold.tokens);
    await engine.close();
  });

  it('continues a slot whose retained tokens prefix the next prompt (multi-turn)', async () => {
    // Scripted ASCII output, so the completion text re-tokenizes to the same tokens.
    const script = (_l: number, fed: number) => 98 + (fed % 26);
    const { engine } = makeEngine({ slots: 2, script }, {}, 1000);
    const first = await collect(engine.generate({ prompt: 'User: hi\nBot:', maxTokens: 6, sampler: greedy }));
    const sofar = 'User: hi\nBot:' + first.stop.text;
    // Retained = prompt + the completion tokens that were fed (all but the last one).
    const follow = await collect(engine.generate({ prompt: sofar + '\nUser: more', maxTokens: 3, sampler: greedy }));
    const start = follow.events.find((e) => e.type === 'start') as { cachedTokens: number };
    assert.strictEqual(start.cachedTokens, byteTokenizer.encode(sofar).length - 1);
    const { engine: cold } = makeEngine({ slots: 1, script }, {}, 1000);
    const ref = await collect(cold.generate({ prompt: sofar + '\nUser: more', maxTokens: 3, sampler: greedy }));
    assert.deepStrictEqual(follow.tokens, ref.tokens);
    await Promise.all([engine.close(), cold.close()]);
  });
});

describe('scheduler: choose, embed, states', () => {
  it('choose ranks the continuation the model predicts highest first', async () => {
    const { engine } = makeEngine({ slots: 3 });
    const prompt = 'The answer is';
    const g = await collect(engine.generate({ prompt, maxTokens: 4, sampler: greedy }));
    const choices = ['zzzz', g.stop.text, 'qq', '!!!!!'];
    const r = await engine.choose(prompt, choices);
    assert.strictEqual(r.ranking[0].index, 1);
    assert.strictEqual(r.ranking.length, 4);
    for (let i = 1; i < r.ranking.length; i++) assert.ok(r.ranking[i - 1].perplexity <= r.ranking[i].perplexity);
    const cal = await engine.choose(prompt, choices, { calibrate: true });
    assert.strictEqual(cal.ranking.length, 4);
    await assert.rejects(engine.choose(prompt, []), RequestError);
    await engine.close();
  });

  it('choose over many choices warns of no listener leak: one signal serves every choice’s task by design', async () => {
    // Node prints "MaxListenersExceededWarning: Possible EventTarget memory leak" into an operator's n8n or Node-RED log
    // when more than 10 listeners sit on one AbortSignal; a choose puts one per choice on its shared signal.
    const { engine } = makeEngine({ slots: 2 });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const choices = Array.from({ length: 40 }, (_, i) => `choice ${i}`);
      assert.strictEqual((await engine.choose('Pick one:', choices)).ranking.length, 40);
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
    } finally {
      process.off('warning', onWarning);
      await engine.close();
    }
    assert.deepStrictEqual(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')), []);
  });

  it('embed returns a layer vector that depends on the text', async () => {
    const { engine } = makeEngine({ slots: 2 });
    const a = await engine.embed('hello');
    const b = await engine.embed('world');
    assert.strictEqual(a.length, 4);
    assert.notDeepStrictEqual(a, b);
    assert.deepStrictEqual(await engine.embed('hello', { layer: -1 }), a);
    await assert.rejects(engine.embed('x', { layer: 3 }), /layer/);
    await engine.close();
  });

  it('saves a conversation as CBOR and continues from it as an initial state', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conv-'));
    const { engine } = makeEngine({ slots: 2 }, { stateDir: dir });
    const saved = await engine.saveConversation('User: tell me a story\nBot:', 'story.cbor');
    assert.strictEqual(saved.tokens, 26);
    const info = await engine.loadConversation('story.cbor', 'story');
    assert.strictEqual(info.name, 'story');
    assert.deepStrictEqual(engine.listStates().map((s) => s.name), ['story']);
    const fromState = await collect(engine.generate({ prompt: '', state: 'story', maxTokens: 5, sampler: greedy }));
    const direct = await collect(engine.generate({ prompt: 'User: tell me a story\nBot:', maxTokens: 5, sampler: greedy }));
    assert.deepStrictEqual(fromState.tokens, direct.tokens);
    engine.unloadState('story');
    assert.throws(() => engine.generate({ prompt: 'x', state: 'story' }), /unknown initial state/);
    fs.writeFileSync(path.join(dir, 'bad.cbor'), Buffer.from([0xa1, 0x61, 0x61, 0x01]));
    await assert.rejects(engine.loadState('bad', 'bad.cbor'), StateFileError);
    await assert.rejects(engine.loadState('missing', 'nope.st'), /not found/);
    // The engine still serves requests after the bad files.
    assert.strictEqual((await collect(engine.generate({ prompt: 'ok', maxTokens: 2, sampler: greedy }))).stop.completionTokens, 2);
    await engine.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('scheduler: failures stay per request', () => {
  it('rejects bad parameters before queueing, with clear messages', async () => {
    const { engine } = makeEngine({ slots: 1 });
    const bad: [GenerateRequest, RegExp][] = [
      [{ prompt: 'x', sampler: { temperature: -0.1 } }, /temperature/],
      [{ prompt: 'x', sampler: { topP: 1.5 } }, /topP/],
      [{ prompt: 'x', maxTokens: 0 }, /maxTokens/],
      [{ prompt: 'x', stop: [''] }, /stop\[0\]/],
      [{ prompt: 42 as never }, /prompt must be a string/],
      [{ prompt: '' }, /prompt is empty/],
      [{ prompt: 'x', state: 'nope' }, /unknown initial state/],
      [{ prompt: 'x', grammar: 'root ::= "a"' }, /grammar module/],
      [{ prompt: 'x', sampler: { logitBias: { 9999: 1 } } }, /vocabulary/],
    ];
    for (const [req, message] of bad) assert.throws(() => engine.generate(req), message);
    assert.strictEqual(engine.scheduler.queued + engine.scheduler.active, 0);
    await engine.close();
  });

  it('a backend failure ends only the requests of that step; the engine keeps serving', async () => {
    const { engine, fake } = makeEngine({ slots: 2 });
    fake.failNext = new Error('device lost (simulated)');
    await assert.rejects(collect(engine.generate({ prompt: 'boom', maxTokens: 3, sampler: greedy })), /device lost/);
    const after = await collect(engine.generate({ prompt: 'fine', maxTokens: 3, sampler: greedy }));
    assert.strictEqual(after.stop.completionTokens, 3);
    await engine.close();
  });

  it('an error inside one request (its constraint throws) does not disturb the others', async () => {
    const fake = new FakeBackend({ slots: 2 });
    const engine = new RwkvEngine({
      backend: fake,
      tokenizer: byteTokenizer,
      compileConstraint: () => ({
        newMatcher: () => ({
          fillMask: (m: Uint32Array) => m.fill(0xffffffff),
          forcedToken: () => null,
          accept: () => {
            throw new Error('matcher exploded');
          },
          isAccepting: () => false,
          isDone: () => false,
          completionTokens: () => [],
        }),
        validateOutput: () => true,
      }),
    });
    const good = collect(engine.generate({ prompt: 'good', maxTokens: 8, sampler: greedy }));
    const bad = collect(engine.generate({ prompt: 'bad', grammar: 'x', maxTokens: 8, sampler: greedy }));
    await assert.rejects(bad, /matcher exploded/);
    assert.strictEqual((await good).stop.completionTokens, 8);
    await engine.close();
  });

  it('a grammar forces tokens, allows end of text only when accepting, and validates the output', async () => {
    const fake = new FakeBackend({ slots: 1 });
    const target = Buffer.from('{"a":1}');
    const engine = new RwkvEngine({
      backend: fake,
      tokenizer: byteTokenizer,
      compileConstraint: () => ({
        newMatcher: () => {
          let at = 0;
          return {
            fillMask: (m: Uint32Array) => {
              const id = target[at] + 1;
              m[id >>> 5] |= 1 << (id & 31);
            },
            forcedToken: () => (at % 2 === 0 && at < target.length ? target[at] + 1 : null),
            accept: () => void at++,
            isAccepting: () => at === target.length,
            isDone: () => false,
            completionTokens: () => Array.from(target.subarray(at), (b) => b + 1),
          };
        },
        validateOutput: (t: string) => t === '{"a":1}',
      }),
    });
    const r = await collect(engine.generate({ prompt: 'json:', jsonSchema: { type: 'object' }, maxTokens: 30, sampler: { temperature: 1, seed: 1 } }));
    assert.strictEqual(r.stop.text, '{"a":1}');
    assert.strictEqual(r.stop.reason, 'eos');
    assert.deepStrictEqual(r.stop.json, { a: 1 });
    await engine.close();
  });
});

describe('scheduler: grammar module integration', () => {
  /** An engine over the fake backend with the real World tokenizer and grammar module. */
  async function grammarEngine(slots: number): Promise<RwkvEngine> {
    const { WorldTokenizer } = await import('../engine/tokenizer.js');
    const { compileConstraint } = await import('../engine/grammar/index.js');
    const fake = new FakeBackend({ slots, vocab: 65536 });
    return new RwkvEngine({ backend: fake, tokenizer: WorldTokenizer.bundled(), compileConstraint: compileConstraint as never });
  }

  it('constrains output with a real grammar and JSON schema over the World vocabulary', async function () {
    this.timeout(60000);
    const engine = await grammarEngine(2);
    const yesNo = await collect(engine.generate({ prompt: 'Answer:', grammar: 'root ::= "yes" | "no"', maxTokens: 10, sampler: { seed: 5 } }));
    assert.ok(['yes', 'no'].includes(yesNo.stop.text), yesNo.stop.text);
    assert.ok(yesNo.stop.reason === 'grammar' || yesNo.stop.reason === 'eos');
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
    const json = await collect(engine.generate({ prompt: 'JSON:', jsonSchema: schema, maxTokens: 60, sampler: { seed: 2 } }));
    if (json.stop.reason !== 'length') assert.strictEqual(typeof (json.stop.json as { ok: unknown }).ok, 'boolean');
    assert.throws(() => engine.generate({ prompt: 'x', grammar: 'root ::= "unterminated' }), /grammar|string|quote|expect/i);
    await engine.close();
  });

  it('closes schema output along the shortest completion when the token budget runs out', async function () {
    this.timeout(60000);
    const engine = await grammarEngine(4);
    // Free-text fields the random model would fill for ever: only closing can end these in budget.
    const schema = {
      type: 'object',
      properties: { title: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } }, n: { type: 'integer' } },
      required: ['title', 'tags', 'n'],
      additionalProperties: false,
    };
    for (const [seed, maxTokens] of [[1, 24], [2, 30], [3, 40], [4, 60]]) {
      const r = await collect(engine.generate({ prompt: 'JSON:', jsonSchema: schema, maxTokens, sampler: { seed, temperature: 1.5, topP: 1 } }));
      assert.ok(r.stop.completionTokens <= maxTokens, `used ${r.stop.completionTokens} of ${maxTokens}`);
      const v = r.stop.json as { title: unknown; tags: unknown; n: unknown };
      assert.strictEqual(typeof v.title, 'string', r.stop.text);
      assert.ok(Array.isArray(v.tags), r.stop.text);
      assert.ok(Number.isInteger(v.n), r.stop.text);
    }
    await engine.close();
  });
});
