// Per-token log-probabilities and top alternatives on generate: exact against a reference softmax on the
// fake CPU backend (full-row sampling), the GPU 'top' path against the full-row path on the real engine,
// and their way through the Generate nodes of both hosts.

import * as assert from 'assert';
import type { GenerateEvent, TokenLogprob } from '../engine/api';
import { createEngine } from '../engine/engine-factory';
import { RwkvEngine } from '../engine/engine';
import { RwkvGenerate } from '../nodes/RwkvGenerate/RwkvGenerate.node';
import { releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { prepareGenerate } from '../nodes/shared/generate-request';
import { byteTokenizer, FakeBackend } from './fake-backend';
import { FakeEngineProvider } from './nodes-fake-engine';
import { executeContext } from './nodes-n8n-context';

type Stop = Extract<GenerateEvent, { type: 'stop' }>;

async function collect(it: AsyncIterable<GenerateEvent>) {
  const events: GenerateEvent[] = [];
  for await (const e of it) events.push(e);
  const stop = events[events.length - 1] as Stop;
  const deltas = events.filter((e): e is Extract<GenerateEvent, { type: 'delta' }> => e.type === 'delta');
  return { stop, tokens: deltas.flatMap((d) => d.tokens), logprobs: deltas.flatMap((d) => d.logprobs ?? []), deltas };
}

function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const logZ = Math.log(sum) + max;
  return Float64Array.from(logits, (x) => x - logZ);
}

const NO_PENALTY = { presencePenalty: 0, frequencyPenalty: 0 };

describe('generate logprobs (fake backend, full-row sampling)', () => {
  const make = () => {
    const fake = new FakeBackend({ slots: 2, seed: 3 });
    return { fake, engine: new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, compileConstraint: null }) };
  };

  for (const [name, sampler] of [
    ['sampled (temperature 1, nucleus)', { ...NO_PENALTY, temperature: 1, topP: 0.9, seed: 5, logitBias: { 0: -Infinity } }],
    ['greedy', { ...NO_PENALTY, temperature: 0, logitBias: { 0: -Infinity } }],
  ] as const) {
    it(`${name}: each token's logprob and the top 3 match the softmax of the model's logits`, async () => {
      const { fake, engine } = make();
      const prompt = 'Hello';
      const { stop, tokens, logprobs } = await collect(engine.generate({ prompt, maxTokens: 12, sampler, topLogprobs: 3 }));
      assert.strictEqual(logprobs.length, tokens.length);
      assert.ok(tokens.length >= 6);
      const context = byteTokenizer.encode(prompt);
      for (let i = 0; i < tokens.length; i++) {
        const ref = logSoftmax(fake.referenceLogits(context));
        // The bias of -Infinity on end of text is part of the distribution drawn from: renormalise without it.
        ref[0] = -Infinity;
        const rest = Math.log(ref.reduce((s, x) => s + Math.exp(x), 0));
        const expected = Float64Array.from(ref, (x) => x - rest);
        const lp = logprobs[i];
        assert.strictEqual(lp.id, tokens[i]);
        assert.ok(Math.abs(lp.logprob - expected[tokens[i]]) < 1e-4, `token ${i}: ${lp.logprob} vs ${expected[tokens[i]]}`);
        const best = Array.from(expected.keys()).sort((a, b) => expected[b] - expected[a]).slice(0, 3);
        assert.deepStrictEqual(lp.top!.map((t) => t.id), best);
        for (const t of lp.top!) assert.ok(Math.abs(t.logprob - expected[t.id]) < 1e-4);
        if (name === 'greedy') assert.strictEqual(lp.top![0].id, tokens[i]);
        context.push(tokens[i]);
      }
      const mean = logprobs.reduce((s, l) => s + l.logprob, 0) / logprobs.length;
      assert.ok(Math.abs(stop.meanLogprob! - mean) < 1e-9);
      await engine.close();
    });
  }

  it('reports nothing unless asked, and checks the fields', async () => {
    const { engine } = make();
    const plain = await collect(engine.generate({ prompt: 'Hi', maxTokens: 3, sampler: NO_PENALTY }));
    assert.strictEqual(plain.logprobs.length, 0);
    assert.ok(plain.deltas.every((d) => !('logprobs' in d)));
    assert.strictEqual(plain.stop.meanLogprob, undefined);
    const only = await collect(engine.generate({ prompt: 'Hi', maxTokens: 3, sampler: NO_PENALTY, logprobs: true }));
    assert.ok(only.logprobs.length > 0 && only.logprobs.every((l) => l.top === undefined && l.logprob <= 0));
    assert.throws(() => engine.generate({ prompt: 'Hi', topLogprobs: 21 }), /topLogprobs must be an integer in \[0, 20\]/);
    assert.throws(() => engine.generate({ prompt: 'Hi', logprobs: 'yes' as never }), /logprobs must be true or false/);
    await engine.close();
  });
});

describe('generate logprobs on the real engine (bundled model)', function () {
  this.timeout(300000);
  it("the GPU 'top' path reports the same logprobs as the full row", async () => {
    const engine = await createEngine({ precision: 'f32', maxBatch: 2 });
    try {
      const prompt = 'The capital of France is';
      // Greedy nucleus decodes from the GPU's top-256; greedy typical reads the whole row.
      const run = (kind: 'nucleus' | 'typical') =>
        collect(engine.generate({ prompt, maxTokens: 8, sampler: { ...NO_PENALTY, kind, temperature: 0 }, topLogprobs: 5 }));
      const [top, full] = await Promise.all([run('nucleus'), run('typical')]);
      assert.deepStrictEqual(top.tokens, full.tokens);
      const close = (a: TokenLogprob, b: TokenLogprob) => {
        assert.ok(Math.abs(a.logprob - b.logprob) < 1e-3, `${a.logprob} vs ${b.logprob}`);
        assert.deepStrictEqual(a.top!.map((t) => t.id), b.top!.map((t) => t.id));
      };
      top.logprobs.forEach((l, i) => close(l, full.logprobs[i]));
      assert.ok(top.stop.meanLogprob! < 0 && top.stop.meanLogprob! > -20);
    } finally {
      await engine.close();
    }
  });
});

describe('logprobs in the Generate nodes', () => {
  let provider: FakeEngineProvider;
  beforeEach(() => {
    process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    provider = new FakeEngineProvider();
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await releaseIdleEngines();
    setEngineProvider(undefined);
    delete process.env.RWKV_FLOW_IDLE_SECONDS;
  });

  it('prepareGenerate passes logprobs and topLogprobs, and bounds them', () => {
    assert.deepStrictEqual(prepareGenerate({ prompt: 'x', logprobs: 'true', topLogprobs: '2' }).request, { prompt: 'x', logprobs: true, topLogprobs: 2 });
    assert.throws(() => prepareGenerate({ prompt: 'x', topLogprobs: 50 }), /topLogprobs: must be at most 20/);
  });

  it('RWKV Generate outputs logprobs and meanLogprob per item', async () => {
    const { ctx } = executeContext({
      items: [{ json: {} }],
      params: { inputMode: 'prompt', prompt: 'a b c', maxTokens: 8, constraint: 'none', options: { logprobs: true, topLogprobs: 2 } },
    });
    const [out] = (await new RwkvGenerate().execute!.call(ctx)) as { json: Record<string, any> }[][];
    assert.strictEqual(provider.engine.requests[0].topLogprobs, 2);
    assert.strictEqual(out[0].json.logprobs.length, out[0].json.usage.completionTokens);
    assert.strictEqual(typeof out[0].json.meanLogprob, 'number');
  });
});
