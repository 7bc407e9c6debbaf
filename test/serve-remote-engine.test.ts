// The remote engine (engine/remote-engine.ts) against the in-process engine it stands for: two identical
// engines on the fake CPU backend, one called directly, one through a `rwkv-flow serve` server on a loopback
// port. Same events, same results, same error classes and messages, and cancellation that frees the
// server's slot.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Engine, GenerateEvent, GenerateRequest } from '../engine/api';
import type { RwkvEngine } from '../engine/engine';
import { QueueFullError, RequestError, StateFileError } from '../engine/errors';
import { connectRemoteEngine, RemoteEngine } from '../engine/remote-engine';
import type { RunningServer } from '../engine/server/server';
import { fakeEngine, serveOn, until } from './serve-fixtures';

/** Events without wall-clock timing, which differs run to run. */
async function events(engine: Engine, req: GenerateRequest, signal?: AbortSignal): Promise<GenerateEvent[]> {
  const out: GenerateEvent[] = [];
  for await (const e of engine.generate(req, { signal })) out.push(e.type === 'stop' ? { ...e, timing: { queueMs: 0, prefillMs: 0, decodeMs: 0, totalMs: 0 } } : e);
  return out;
}

async function failure(fn: () => Promise<unknown>): Promise<Error> {
  try {
    await fn();
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected an error');
}

describe('remote engine: the Engine API through rwkv-flow serve', function () {
  this.timeout(60000);
  const KEY = 'remote-key';
  let dirs: string[];
  let local: RwkvEngine;
  let served: RwkvEngine;
  let server: RunningServer;
  let remote: RemoteEngine;

  beforeEach(async () => {
    dirs = [0, 1].map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-remote-')));
    local = fakeEngine({ slots: 2 }, { stateDir: dirs[0] }).engine;
    served = fakeEngine({ slots: 2 }, { stateDir: dirs[1] }).engine;
    server = await serveOn(served, { apiKey: KEY });
    remote = await RemoteEngine.connect({ url: server.url, apiKey: KEY });
  });
  afterEach(async () => {
    remote.close();
    await server.close();
    await local.close();
    await served.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('reports the served model', () => {
    assert.deepStrictEqual(remote.modelInfo, served.modelInfo);
  });

  it('generates the same events as the in-process engine', async () => {
    const requests: GenerateRequest[] = [
      { prompt: 'Once upon a time', maxTokens: 12, sampler: { temperature: 0 } },
      { prompt: 'The quick brown fox', maxTokens: 20, sampler: { seed: 4, temperature: 1.2, topP: 0.9 } },
      { prompt: 'stop here', maxTokens: 30, stop: ['e'], sampler: { seed: 9 } },
    ];
    for (const req of requests) assert.deepStrictEqual(await events(remote, req), await events(local, req), JSON.stringify(req));
  });

  it('keeps error classes and messages', async () => {
    const pairs: [string, (e: Engine) => Promise<unknown>][] = [
      ['unknown field', (e) => events(e, { prompt: 'x', nope: 1 } as never)],
      ['bad sampler', (e) => events(e, { prompt: 'x', sampler: { topP: 7 } })],
      ['no grammar module', (e) => events(e, { prompt: 'x', grammar: 'root ::= "a"' })],
      ['unknown state', (e) => events(e, { prompt: 'x', state: 'nothing-loaded' })],
      ['one choice', (e) => e.choose('x', [])],
      ['bad layer', (e) => e.embed('x', { layer: 7 })],
      ['escaping file', (e) => e.saveConversation('x', '../out.cbor')],
      ['missing file', (e) => e.loadConversation('missing.cbor', 'c')],
      ['empty bytes', (e) => e.loadState('s', new Uint8Array(0))],
      ['bad conversation bytes', (e) => e.loadState('s', new Uint8Array([0xa0]))],
    ];
    for (const [what, call] of pairs) {
      const here = await failure(() => call(local));
      const there = await failure(() => call(remote));
      assert.strictEqual(there.constructor, here.constructor, `${what}: ${there.name} vs ${here.name}`);
      assert.strictEqual(there.name, here.name, what);
      assert.strictEqual(there.message, here.message, what);
    }
    const err = await failure(() => events(remote, { prompt: 'x', nope: 1 } as never));
    assert.ok(err instanceof RequestError);
    assert.ok((await failure(() => remote.loadConversation('missing.cbor', 'c'))) instanceof StateFileError);
  });

  it('a full queue is a QueueFullError with its bound', async () => {
    const slow = fakeEngine({ slots: 1, delayMs: 5 }, { maxQueue: 0 }).engine;
    const s = await serveOn(slow);
    const r = await RemoteEngine.connect({ url: s.url });
    try {
      const first = events(r, { prompt: 'first', maxTokens: 40 });
      await until(() => slow.metrics().active === 1, 'the first request to run');
      const err = await failure(() => events(r, { prompt: 'second', maxTokens: 4 }));
      assert.ok(err instanceof QueueFullError, err.name);
      assert.strictEqual((err as QueueFullError).maxQueue, 0);
      assert.match(err.message, /queue is full \(0 requests/);
      await first;
    } finally {
      r.close();
      await s.close();
      await slow.close();
    }
  });

  it('an abort ends the stream with the abort stop event and frees the server\'s slot', async () => {
    const slow = fakeEngine({ slots: 1, delayMs: 5 }).engine;
    const s = await serveOn(slow);
    const r = await RemoteEngine.connect({ url: s.url });
    try {
      const controller = new AbortController();
      const seen: GenerateEvent[] = [];
      for await (const e of r.generate({ prompt: 'long', maxTokens: 4000, sampler: { logitBias: { 0: -1000 } } }, { signal: controller.signal })) {
        seen.push(e);
        if (seen.filter((x) => x.type === 'delta').length === 3) controller.abort();
      }
      const stop = seen[seen.length - 1] as Extract<GenerateEvent, { type: 'stop' }>;
      assert.strictEqual(stop.type, 'stop');
      assert.strictEqual(stop.reason, 'abort');
      const deltas = seen.filter((x): x is Extract<GenerateEvent, { type: 'delta' }> => x.type === 'delta');
      assert.strictEqual(stop.text, deltas.map((d) => d.text).join(''));
      assert.strictEqual(stop.completionTokens, deltas.reduce((n, d) => n + d.tokens.length, 0));
      assert.strictEqual(stop.promptTokens, 4);
      await until(() => slow.metrics().active === 0, 'the server to free the slot', 5000);

      // Leaving the loop early cancels too, as with the in-process engine.
      for await (const e of r.generate({ prompt: 'again', maxTokens: 4000, sampler: { logitBias: { 0: -1000 } } })) if (e.type === 'delta') break;
      await until(() => slow.metrics().active === 0, 'the server to free the slot after break', 5000);

      // Aborted before it starts: the abort stop event, and nothing reaches the server.
      const steps = slow.metrics().steps;
      const pre = new AbortController();
      pre.abort();
      const only = await events(r, { prompt: 'never' }, pre.signal);
      assert.deepStrictEqual(only.map((e) => e.type === 'stop' && e.reason), ['abort']);
      assert.strictEqual(slow.metrics().steps, steps);
    } finally {
      r.close();
      await s.close();
      await slow.close();
    }
  });

  it('choose and embed give the in-process results exactly', async () => {
    assert.deepStrictEqual(await remote.choose('The answer is', [' yes', ' no', ' maybe'], { calibrate: true }), await local.choose('The answer is', [' yes', ' no', ' maybe'], { calibrate: true }));
    const here = await local.embed('some text', { layer: 0 });
    const there = await remote.embed('some text', { layer: 0 });
    assert.ok(there instanceof Float32Array);
    assert.deepStrictEqual(there, here);
  });

  it('states: load bytes, list, unload in order, conversations in the server\'s state folder', async () => {
    const saved = await remote.saveConversation('a conversation so far', 'chats/one.cbor');
    assert.deepStrictEqual(saved, await local.saveConversation('a conversation so far', 'chats/one.cbor'));
    assert.ok(fs.existsSync(path.join(dirs[1], 'chats', 'one.cbor')), 'saved in the server\'s folder');
    const bytes = fs.readFileSync(path.join(dirs[1], 'chats', 'one.cbor'));
    const fromBytes = await remote.loadState('uploaded', new Uint8Array(bytes));
    assert.deepStrictEqual(fromBytes, await local.loadState('uploaded', new Uint8Array(bytes)));
    const fromFile = await remote.loadConversation('chats/one.cbor', 'chat');
    assert.deepStrictEqual(fromFile, await local.loadConversation('chats/one.cbor', 'chat'));
    assert.deepStrictEqual(remote.listStates(), local.listStates());
    const req = { prompt: ' and then', maxTokens: 6, state: 'chat', sampler: { temperature: 0 } };
    assert.deepStrictEqual(await events(remote, req), await events(local, req));
    // An unload is synchronous; the next call sees it.
    remote.unloadState('chat');
    local.unloadState('chat');
    assert.deepStrictEqual(remote.listStates(), local.listStates());
    const here = await failure(() => events(local, req));
    const there = await failure(() => events(remote, req));
    assert.strictEqual(there.message, here.message);
    assert.deepStrictEqual(served.listStates(), local.listStates());
  });

  it('says clearly when the server is not there or refuses the key', async () => {
    await assert.rejects(connectRemoteEngine({ url: server.url, apiKey: 'wrong' }), /refused the API key \(HTTP 401\)/);
    await assert.rejects(connectRemoteEngine({ url: server.url }), /refused the API key/);
    const closed = await serveOn(fakeEngine().engine);
    const url = closed.url;
    await closed.close();
    await assert.rejects(connectRemoteEngine({ url }), /rwkv-flow server at http:\/\/127\.0\.0\.1:\d+ is not reachable \(ECONNREFUSED\)/);
    await assert.rejects(connectRemoteEngine({ url: 'ftp://x' }), /must be http:\/\/ or https:\/\//);
  });
});
