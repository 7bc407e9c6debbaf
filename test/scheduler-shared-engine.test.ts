import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createEngine } from '../engine/engine-factory';
import type { EngineConfig } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { EngineClosedError } from '../engine/errors';
import { acquireEngine, sharedEngineCount, type EngineFactory } from '../engine/shared-engine';
import { byteTokenizer, FakeBackend } from './fake-backend';

describe('scheduler: shared engine', () => {
  const made: { config: EngineConfig; engine: RwkvEngine; backend: FakeBackend }[] = [];
  const factory: EngineFactory = async (config) => {
    const backend = new FakeBackend({ slots: config.maxBatch ?? 2 });
    const engine = new RwkvEngine({ backend, tokenizer: byteTokenizer, config, compileConstraint: null });
    made.push({ config, engine, backend });
    return engine;
  };
  beforeEach(() => (made.length = 0));

  it('creates one engine lazily, shares it, and disposes it when the last lease is released', async () => {
    const before = sharedEngineCount();
    const a = await acquireEngine({ modelPath: 'm1', maxBatch: 2 }, factory);
    const b = await acquireEngine({ modelPath: 'm1', maxBatch: 2 }, factory);
    assert.strictEqual(made.length, 1);
    assert.strictEqual(sharedEngineCount(), before + 1);
    assert.strictEqual(a.engine.modelInfo.adapter, 'fake-cpu');
    await a.release();
    await a.release(); // idempotent
    assert.ok(!made[0].backend.disposed);
    let events = 0;
    for await (const _ of b.engine.generate({ prompt: 'hi', maxTokens: 2, sampler: { temperature: 0, logitBias: { 0: -Infinity } } })) events++;
    assert.ok(events >= 3);
    await b.release();
    assert.ok(made[0].backend.disposed);
    assert.strictEqual(sharedEngineCount(), before);
    await assert.rejects(b.engine.embed('x'), EngineClosedError);
  });

  it('keeps one engine per model and settings: a second config of a model gets its own engine', async () => {
    const a = await acquireEngine({ modelPath: 'm2', maxBatch: 2 }, factory);
    const other = await acquireEngine({ modelPath: 'm3' }, factory);
    assert.strictEqual(made.length, 2);
    const b = await acquireEngine({ modelPath: 'm2', maxBatch: 3 }, factory);
    assert.strictEqual(made.length, 3);
    // The first lease keeps its own engine and settings; nothing was closed under it.
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(!made[0].backend.disposed);
    assert.strictEqual((await a.engine.embed('abc')).length, 4);
    assert.ok(made[0].engine.scheduler.stats.steps > 0 && made[2].engine.scheduler.stats.steps === 0);
    await a.release();
    assert.ok(made[0].backend.disposed && !made[2].backend.disposed);
    await b.release();
    await other.release();
    assert.ok(made[2].backend.disposed && made[1].backend.disposed);
  });

  it('rebuilds an engine whose GPU device was lost, for existing leases and new ones', async () => {
    const a = await acquireEngine({ modelPath: 'm-lost', maxBatch: 2 }, factory);
    assert.strictEqual((await a.engine.embed('abc')).length, 4);
    // The device goes away: the backend reports it, and its runs fail.
    Object.defineProperty(made[0].backend, 'lost', { value: 'GPU device lost (unknown): test' });
    made[0].backend.run = () => Promise.reject(new Error('GPU device lost (unknown): test'));
    // The next use through the old lease is served by a fresh engine.
    assert.strictEqual((await a.engine.embed('abc')).length, 4);
    assert.strictEqual(made.length, 2);
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(made[0].backend.disposed, 'the broken engine was closed');
    const b = await acquireEngine({ modelPath: 'm-lost', maxBatch: 2 }, factory);
    assert.strictEqual(made.length, 2, 'a healthy engine is shared, not rebuilt');
    await a.release();
    await b.release();
    assert.ok(made[1].backend.disposed);
  });

  it('shares the registry through a global symbol', () => {
    const g = globalThis as unknown as Record<symbol, unknown>;
    assert.ok(g[Symbol.for('rwkv-flow.shared-engines.v1')]);
  });

  it('a failing load rejects the acquire and leaves nothing behind', async () => {
    const before = sharedEngineCount();
    await assert.rejects(
      acquireEngine({ modelPath: 'broken' }, async () => {
        throw new Error('model file not found: broken');
      }),
      /not found/,
    );
    assert.strictEqual(sharedEngineCount(), before);
  });

  it('names the missing bundled default model clearly', async () => {
    // The default model's location pointed at a file that does not exist (the real one is installed).
    const missing = path.join(os.tmpdir(), `rwkv-flow-no-default-${process.pid}`, 'default.st');
    assert.ok(!fs.existsSync(missing));
    const before = sharedEngineCount();
    // The message says it is the bundled default, where it looked, and what to set instead.
    const expected = (e: Error) => {
      for (const part of [`bundled default model ${path.join('models', 'default.st')} is not installed`, `(looked at ${missing})`, 'set modelPath']) {
        assert.ok(e.message.includes(part), `"${e.message}" lacks "${part}"`);
      }
      return true;
    };
    await assert.rejects(createEngine({}, missing), expected);
    await assert.rejects(acquireEngine({}, (config) => createEngine(config, missing)), expected);
    assert.strictEqual(sharedEngineCount(), before);
    // A model the config names is reported as that file, not as the bundled default.
    const named = path.join(path.dirname(missing), 'mine.st');
    await assert.rejects(createEngine({ modelPath: named }, missing), { message: `model file not found: ${named}` });
  });
});
