// Operator limits that no request can exceed (issue #11, item 9): the max-tokens cap, the per-request
// deadline, the number of named states and one cache byte bound across them, and choose() that is
// queued whole or not at all and cancels its other parts when one fails. On the fake CPU backend.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { EngineConfig, GenerateEvent } from '../engine/api';
import { encodeConversation, modelSignature } from '../engine/conversation-file';
import { RwkvEngine } from '../engine/engine';
import { RequestError } from '../engine/errors';
import { InitialStateRegistry } from '../engine/initial-states';
import { RequestTimeoutError } from '../engine/request-deadline';
import type { SlotJob } from '../engine/types';
import { byteTokenizer, FakeBackend, type FakeBackendOptions } from './fake-backend';

type Stop = Extract<GenerateEvent, { type: 'stop' }>;

const greedy = { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, logitBias: { 0: -Infinity } };

function makeEngine(backend: Partial<FakeBackendOptions> & { slots: number }, config: EngineConfig = {}, fake = new FakeBackend(backend)) {
  const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config, cacheMinTokens: 4, compileConstraint: null });
  return { fake, engine };
}

async function stopOf(it: AsyncIterable<GenerateEvent>): Promise<Stop> {
  let last: GenerateEvent | undefined;
  for await (const e of it) last = e;
  assert.strictEqual(last?.type, 'stop');
  return last as Stop;
}

/** Lets the scheduler loop run until it has nothing left (bounded by steps, not wall time). */
async function settle(engine: RwkvEngine): Promise<void> {
  for (let i = 0; i < 2000 && (engine.scheduler.active > 0 || engine.scheduler.queued > 0); i++) {
    await new Promise((r) => setTimeout(r, 2));
  }
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

const f32 = (n: number) => new Float32Array(n);

describe('request limits: max tokens cap', () => {
  it('refuses maxTokens above the operator cap, naming both numbers, before anything is queued', async () => {
    const { engine, fake } = makeEngine({ slots: 1 }, { maxTokensLimit: 16 });
    assert.throws(
      () => engine.generate({ prompt: 'hi', maxTokens: 1_048_576 }),
      (e: Error) => e instanceof RequestError && /1048576/.test(e.message) && /16/.test(e.message) && /maxTokensLimit/.test(e.message),
    );
    assert.strictEqual(fake.calls.length, 0);
    assert.strictEqual(engine.scheduler.queued, 0);
    await engine.close();
  });

  it('gives a request without maxTokens min(default, cap) tokens, and exactly the cap when asked for it', async () => {
    const { engine } = makeEngine({ slots: 1 }, { maxTokensLimit: 5 });
    const unset = await stopOf(engine.generate({ prompt: 'hi', sampler: greedy }));
    assert.strictEqual(unset.reason, 'length');
    assert.strictEqual(unset.completionTokens, 5);
    const atCap = await stopOf(engine.generate({ prompt: 'hi', maxTokens: 5, sampler: greedy }));
    assert.strictEqual(atCap.completionTokens, 5);
    await engine.close();
  });

  it('has a default cap of 4096', async () => {
    const { engine } = makeEngine({ slots: 1 });
    assert.throws(() => engine.generate({ prompt: 'hi', maxTokens: 4097 }), /limit of 4096/);
    await engine.close();
  });

  it('refuses an invalid cap in the configuration', () => {
    assert.throws(() => makeEngine({ slots: 1 }, { maxTokensLimit: 0 }), /maxTokensLimit/);
    assert.throws(() => makeEngine({ slots: 1 }, { requestTimeoutMs: -1 }), /requestTimeoutMs/);
    assert.throws(() => makeEngine({ slots: 1 }, { requestTimeoutMs: 2 ** 40 }), /requestTimeoutMs/);
    assert.throws(() => makeEngine({ slots: 1 }, { maxStates: 1.5 }), /maxStates/);
  });
});

describe('request limits: deadline', function () {
  this.timeout(60000);

  it('ends a long generation at the deadline with RequestTimeoutError and frees its slot', async () => {
    const { engine } = makeEngine({ slots: 1, delayMs: 2 }, { maxTokensLimit: 100_000, requestTimeoutMs: 300 });
    let deltas = 0;
    await assert.rejects(
      (async () => {
        for await (const e of engine.generate({ prompt: 'hi', maxTokens: 100_000, sampler: greedy })) if (e.type === 'delta') deltas++;
      })(),
      (e: Error) => e instanceof RequestTimeoutError && /deadline/.test(e.message) && /requestTimeoutMs/.test(e.message),
    );
    assert.ok(deltas > 0 && deltas < 100_000, `generated ${deltas} tokens before the deadline`);
    await settle(engine);
    assert.strictEqual(engine.scheduler.active, 0);
    // The engine still serves.
    assert.strictEqual((await stopOf(engine.generate({ prompt: 'hi', maxTokens: 2, sampler: greedy }))).completionTokens, 2);
    await engine.close();
  });

  it('ends a request still waiting in the queue at its deadline, leaving nothing queued', async () => {
    const { engine } = makeEngine({ slots: 1, delayMs: 2 }, { maxTokensLimit: 100_000, requestTimeoutMs: 150 });
    const first = stopOf(engine.generate({ prompt: 'a', maxTokens: 100_000, sampler: greedy }));
    const second = stopOf(engine.generate({ prompt: 'b', maxTokens: 3, sampler: greedy }));
    await Promise.all([assert.rejects(first, RequestTimeoutError), assert.rejects(second, RequestTimeoutError)]);
    await settle(engine);
    assert.strictEqual(engine.scheduler.queued, 0);
    assert.strictEqual(engine.scheduler.active, 0);
    await engine.close();
  });

  it('applies to choose and embed too', async () => {
    // Every backend step takes 40 ms; the deadline passes during the first long prompt.
    const { engine } = makeEngine({ slots: 1, delayMs: 40 }, { requestTimeoutMs: 60, chunkSize: 1, prefillChunkSize: 1 });
    await assert.rejects(engine.choose('x'.repeat(50), ['aa', 'bb']), RequestTimeoutError);
    await assert.rejects(engine.embed('y'.repeat(50)), RequestTimeoutError);
    await settle(engine);
    assert.strictEqual(engine.scheduler.active + engine.scheduler.queued, 0);
    await engine.close();
  });

  it('reports a caller abort as an abort, not a timeout', async () => {
    const { engine } = makeEngine({ slots: 1, delayMs: 2 }, { maxTokensLimit: 100_000, requestTimeoutMs: 60_000 });
    const controller = new AbortController();
    const stop = stopOf(engine.generate({ prompt: 'hi', maxTokens: 100_000, sampler: greedy }, { signal: controller.signal }));
    setTimeout(() => controller.abort(), 30);
    assert.strictEqual((await stop).reason, 'abort');
    await engine.close();
  });
});

describe('request limits: named states and cache bytes', () => {
  function conversationBytes(fake: FakeBackend): Uint8Array {
    return encodeConversation({
      model: modelSignature(fake.info),
      initialState: '',
      tokens: Int32Array.from([1]),
      state: f32(fake.stateSize),
      logits: f32(fake.info.vocabSize),
    });
  }

  it('refuses the 65th named state with maxStates 64, and still replaces a loaded one', async () => {
    const { engine, fake } = makeEngine({ slots: 1 }, { maxStates: 64 });
    const bytes = conversationBytes(fake);
    for (let i = 0; i < 64; i++) await engine.loadState(`s${i}`, bytes);
    await assert.rejects(
      engine.loadState('s64', bytes),
      (e: Error) => e instanceof RequestError && /64/.test(e.message) && /maxStates/.test(e.message),
    );
    assert.strictEqual(engine.listStates().length, 64);
    await engine.loadState('s3', bytes); // same name: a replacement, not a 65th
    engine.unloadState('s0');
    await engine.loadState('s64', bytes);
    assert.strictEqual(engine.listStates().length, 64);
    await engine.close();
  });

  it('counts loads in progress: many loads at once never overshoot maxStates, nor read the refused files', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-limits-'));
    const { engine, fake } = makeEngine({ slots: 1 }, { maxStates: 4, stateDir: dir });
    fs.writeFileSync(path.join(dir, 'conv.bin'), conversationBytes(fake));
    // State files are opened (engine/state-folder.ts) and read from the descriptor: count the opens.
    const open = fs.promises.open;
    let reads = 0;
    fs.promises.open = ((...args: Parameters<typeof open>) => (reads++, open(...args))) as typeof open;
    try {
      const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => engine.loadState(`c${i}`, 'conv.bin')));
      assert.strictEqual(results.filter((r) => r.status === 'fulfilled').length, 4);
      for (const r of results) if (r.status === 'rejected') assert.match(String(r.reason), /maxStates/);
      assert.strictEqual(reads, 4, 'only the loads that had a place read their file');
    } finally {
      fs.promises.open = open;
      fs.rmSync(dir, { recursive: true, force: true });
    }
    assert.strictEqual(engine.listStates().length, 4);
    await engine.close();
  });

  it('keeps the prefix caches of all states together under one cacheBytes bound, evicting the least recently used', () => {
    const entry = 4 * 4 + 2 * 4; // state of 4 floats + logits of 2
    const reg = new InitialStateRegistry(4, entry * 3);
    const caches = [reg.zero, reg.resolve(reg.add('a', f32(4), 'buffer').name), reg.resolve(reg.add('b', f32(4), 'buffer').name)].map(
      (s) => s.cache,
    );
    for (const [i, cache] of caches.entries()) {
      cache.insert([i, 1], f32(4), f32(2));
      cache.insert([i, 2], f32(4), f32(2));
    }
    const total = caches.reduce((n, c) => n + c.bytes, 0);
    assert.ok(total <= entry * 3, `caches hold ${total} bytes together, bound ${entry * 3}`);
    assert.strictEqual(reg.cacheBudget.bytes, total);
    // The least recently used entries overall went first: those of the zero state and the first of 'a'.
    assert.ok(!caches[0].has([0, 1]) && !caches[0].has([0, 2]) && !caches[1].has([1, 1]));
    assert.ok(caches[1].has([1, 2]) && caches[2].has([2, 1]) && caches[2].has([2, 2]));
    // Unloading a state gives its bytes back.
    reg.remove('b');
    assert.strictEqual(reg.cacheBudget.bytes, entry);
    assert.ok(!caches[2].insert([2, 3], f32(4), f32(2)), 'an unloaded state caches nothing more');
  });

  it('bounds the real engine cache bytes across states', async () => {
    const fake = new FakeBackend({ slots: 1 });
    const entryBytes = (fake.stateSize + fake.info.vocabSize) * 4;
    const { engine } = makeEngine({ slots: 1 }, { cacheBytes: entryBytes * 2 }, fake);
    const bytes = conversationBytes(fake);
    for (let i = 0; i < 4; i++) await engine.loadState(`s${i}`, bytes);
    for (let i = 0; i < 4; i++) await stopOf(engine.generate({ prompt: `state ${i} prompt that is cached`, maxTokens: 1, state: `s${i}` }));
    await settle(engine);
    const budget = (engine as unknown as { states: InitialStateRegistry }).states.cacheBudget;
    assert.ok(budget.bytes > 0, 'something was cached');
    assert.ok(budget.bytes <= entryBytes * 2, `caches hold ${budget.bytes} bytes, bound ${entryBytes * 2}`);
    await engine.close();
  });
});

describe('request limits: choose', function () {
  this.timeout(30000);

  it('refuses more choices than the queue can ever hold, up front, leaving nothing queued or run', async () => {
    const { engine, fake } = makeEngine({ slots: 2 }, { maxQueue: 2 });
    const choices = ['a1', 'b2', 'c3', 'd4', 'e5'];
    await assert.rejects(
      engine.choose('pick one', choices),
      (e: Error) => e instanceof RequestError && /5 choices/.test(e.message) && /maxQueue/.test(e.message),
    );
    assert.strictEqual(engine.scheduler.queued, 0);
    assert.strictEqual(engine.scheduler.active, 0);
    await settle(engine);
    assert.strictEqual(fake.calls.length, 0, 'nothing reached the backend');
    // As many as it holds still work.
    const ok = await engine.choose('pick one', choices.slice(0, 4));
    assert.strictEqual(ok.ranking.length, 4);
    await engine.close();
  });

  it('cancels the other parts when one part fails', async () => {
    const Z = 'Z'.charCodeAt(0) + 1;
    class FailOnZ extends FakeBackend {
      override async run(jobs: SlotJob[]) {
        if (jobs.some((j) => Array.from(j.tokens).includes(Z))) {
          this.calls.push(jobs);
          throw new Error('scoring failed on Z');
        }
        return super.run(jobs);
      }
    }
    const fake = new FailOnZ({ slots: 1 });
    const { engine } = makeEngine({ slots: 1 }, {}, fake);
    const others = ['aa', 'bb', 'cc', 'dd', 'ee'];
    await assert.rejects(engine.choose('pick one', ['Zz', ...others]), /scoring failed on Z/);
    const failedAt = fake.calls.length;
    await settle(engine);
    assert.strictEqual(engine.scheduler.queued + engine.scheduler.active, 0);
    const later = fake.calls.slice(failedAt).flatMap((c) => c.flatMap((j) => Array.from(j.tokens)));
    const otherTokens = new Set(others.map((c) => c.charCodeAt(0) + 1));
    assert.ok(!later.some((t) => otherTokens.has(t)), 'no other choice was scored after the failure');
    await engine.close();
  });
});
