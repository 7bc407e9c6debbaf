// Every engine path that feeds a growing state (RWKV-7b) stays within the operator's context limit: a backend
// that refuses a call past it (as the CPU runtime does) never sees one, whether the slot's state comes from the
// zero state, a slot kept from an earlier request, the prefix cache, a loaded conversation or a batch of requests.
// A refused call would end every request of its batch, so one request must never cause one.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { RwkvEngine } from '../engine/engine';
import type { GenerateRequest } from '../engine/api';
import { byteTokenizer } from './fake-backend';
import { GrowingFakeBackend } from './growing-fake-backend';

const B = 'b'.charCodeAt(0) + 1;

async function text(engine: RwkvEngine, req: GenerateRequest): Promise<{ out: string; reason: string }> {
  let out = '';
  let reason = '';
  for await (const e of engine.generate({ sampler: { temperature: 0 }, ...req })) {
    if (e.type === 'delta') out += e.text;
    if (e.type === 'stop') reason = e.reason;
  }
  return { out, reason };
}

describe('context limit of a growing state: no engine path feeds a slot past it (growing fake backend)', () => {
  let dir: string;
  let backend: GrowingFakeBackend;
  let engine: RwkvEngine;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctx-limit-'));
    backend = new GrowingFakeBackend({ slots: 2, script: () => B }, 20);
    engine = new RwkvEngine({ backend, tokenizer: byteTokenizer, config: { stateDir: dir, cacheBytes: 1 << 20 }, cacheMinTokens: 2, compileConstraint: null });
  });
  afterEach(async () => {
    await engine.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a generation that fills the context, then one continuing it from the kept slot and from the prefix cache', async () => {
    const first = await text(engine, { prompt: 'hello' });
    assert.equal(first.out, 'b'.repeat(15));
    assert.equal(first.reason, 'length');
    // The slot kept "hello" + 15 tokens (the last one possibly unfed): a continuation of part of it.
    const second = await text(engine, { prompt: 'hello' + 'b'.repeat(10) });
    assert.equal(second.out.length, 5);
    const third = await text(engine, { prompt: 'hello' + 'b'.repeat(12), maxTokens: 3 });
    assert.equal(third.out.length, 3);
    assert.deepEqual(backend.refused, []);
  });

  it('two requests at once, each filling its own context', async () => {
    const [a, b] = await Promise.all([text(engine, { prompt: 'one two' }), text(engine, { prompt: 'three' })]);
    assert.equal(a.out.length, 13);
    assert.equal(b.out.length, 15);
    assert.deepEqual(backend.refused, []);
  });

  it('choose (calibrated or not) and embed at exactly the limit', async () => {
    await engine.choose('x'.repeat(17), ['abc', 'a'], { calibrate: true });
    await engine.choose('x'.repeat(17), ['abc', 'ab']);
    await engine.embed('y'.repeat(20));
    assert.deepEqual(backend.refused, []);
  });

  it('a conversation saved at the limit loads with its rows, and a generation from it gets what room is left', async () => {
    await engine.saveConversation('z'.repeat(12), 'c.cbor');
    const info = await engine.loadConversation('c.cbor', 'c');
    assert.equal(info.name, 'c');
    const r = await text(engine, { prompt: 'q', state: 'c' });
    assert.equal(r.out.length, 7);
    await assert.rejects(async () => text(engine, { prompt: 'q', state: 'c', maxTokens: 8 }), /7 tokens are left/);
    assert.deepEqual(backend.refused, []);
  });
});
