// Samplers flow builders expect: min_p, the multiplicative repetition penalty over the last N tokens,
// and logit bias given as token text or id (the n8n editor list, Node-RED JSON).

import * as assert from 'assert';
import type { GenerateEvent } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import { prepareGenerate } from '../nodes/shared/generate-request';
import { parseLogitBias } from '../nodes/shared/logit-bias';
import { byteTokenizer, FakeBackend } from './fake-backend';

const rows = 8;
const identity = (id: number) => (id < rows ? id : -1);
const sampler = (opts: object) => new TokenSampler(resolveSamplerOptions({ presencePenalty: 0, frequencyPenalty: 0, ...opts }), rows, identity);

describe('sampler: min_p', () => {
  // p ∝ e^logit: rows 1..4 at 0, -0.5, -1, -3 nats from the best.
  const logits = Float32Array.from([-Infinity, 2, 1.5, 1, -1, -Infinity, -Infinity, -Infinity]);

  it('never draws a token below minP times the best probability, and still draws the others', () => {
    const seen = new Set<number>();
    for (let seed = 0; seed < 400; seed++) seen.add(sampler({ minP: Math.exp(-1.2), topP: 1, topK: 0, seed }).sample(logits));
    assert.deepStrictEqual([...seen].sort(), [1, 2, 3]);
    const without = new Set<number>();
    for (let seed = 0; seed < 400; seed++) without.add(sampler({ topP: 1, topK: 0, seed }).sample(logits));
    assert.ok(without.has(4), 'without min_p the unlikely token is drawn sometimes');
  });

  it('applies to typical sampling too, and is checked', () => {
    for (let seed = 0; seed < 200; seed++) assert.notStrictEqual(sampler({ kind: 'typical', tau: 1, topK: 0, minP: 0.5, seed }).sample(logits), 4);
    assert.throws(() => resolveSamplerOptions({ minP: 1 }), /sampler\.minP must be a number in \[0, 1\)/);
  });
});

describe('sampler: repetition penalty over the last N tokens', () => {
  const logits = Float32Array.from([-Infinity, 5, 4, 3, -Infinity, -Infinity, -Infinity, -Infinity]);

  it('penalises tokens drawn within the window only', () => {
    const s = sampler({ temperature: 0, repetitionPenalty: 2, repetitionWindow: 2 });
    // 5 → 2.5 after its draw; once two other tokens passed, it is back at 5.
    assert.deepStrictEqual([1, 2, 3, 4].map(() => s.sample(logits)), [1, 2, 3, 1]);
    const off = sampler({ temperature: 0 });
    assert.deepStrictEqual([1, 2, 3].map(() => off.sample(logits)), [1, 1, 1]);
  });

  it('makes negative logits more negative, and reads the full row (the GPU top cannot scale by sign)', () => {
    const neg = Float32Array.from([-Infinity, -1, -1.5, -Infinity, -Infinity, -Infinity, -Infinity, -Infinity]);
    const s = sampler({ temperature: 0, repetitionPenalty: 2 });
    assert.deepStrictEqual([s.sample(neg), s.sample(neg)], [1, 2]); // -1 → -2 after its draw
    assert.strictEqual(s.canSampleTop(256), false);
    assert.strictEqual(sampler({ temperature: 0 }).canSampleTop(256), true);
    assert.throws(() => resolveSamplerOptions({ repetitionWindow: 0 }), /sampler\.repetitionWindow must be an integer in \[1, 4096\]/);
  });
});

describe('logit bias by token text or id', () => {
  it('the engine tokenizes logitBiasText and adds the bias to each token', () => {
    const o = resolveSamplerOptions({ logitBias: { 98: 1 }, logitBiasText: { ab: -2 } }, undefined, byteTokenizer.encode);
    // 'a' and 'b' are byte tokens 98 and 99; 98 had a bias of 1 already.
    assert.deepStrictEqual([...o.logitBias].sort((x, y) => x[0] - y[0]), [[98, -1], [99, -2]]);
    assert.throws(() => resolveSamplerOptions({ logitBiasText: { '': 1 } }, undefined, byteTokenizer.encode), /the text must have 1 to 256 characters/);
  });

  it('refuses a bias beyond ±1e6 (past f32 it would be +Infinity on the GPU and break the draw), NaN and +Infinity', () => {
    for (const bad of [1e39, -1e39, 1e6 + 1, Infinity, NaN]) {
      assert.throws(() => resolveSamplerOptions({ logitBias: { 5: bad } }), /sampler\.logitBias\[5\] must be a number in \[-1000000, 1000000\] or -Infinity/);
      assert.throws(() => resolveSamplerOptions({ logitBiasText: { a: bad } }, undefined, byteTokenizer.encode), /must be a number in \[-1000000, 1000000\] or -Infinity/);
    }
    assert.deepStrictEqual([...resolveSamplerOptions({ logitBias: { 5: -Infinity, 6: 1e6, 7: -1e6 } }).logitBias], [[5, -Infinity], [6, 1e6], [7, -1e6]]);
  });

  it('a banned text never appears in the generation', async () => {
    // The backend favours "x" (byte token 121) at every step.
    const fake = new FakeBackend({ slots: 1, seed: 2, script: () => 121 });
    const engine = new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, compileConstraint: null });
    const run = async (sampler: object) => {
      let text = '';
      for await (const e of engine.generate({ prompt: 'ab', maxTokens: 40, sampler: { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, ...sampler } }) as AsyncIterable<GenerateEvent>) {
        if (e.type === 'stop') text = e.text;
      }
      return text;
    };
    assert.strictEqual(await run({}), 'x'.repeat(40));
    const text = await run({ logitBiasText: { x: -Infinity } });
    assert.strictEqual(text.length > 0 && !text.includes('x'), true, JSON.stringify(text));
    await engine.close();
  });

  it('the nodes read the n8n editor list, arrays and id objects', () => {
    assert.deepStrictEqual(
      parseLogitBias('logitBias', { entry: [{ kind: 'text', token: ' no', bias: -100 }, { kind: 'id', token: '42', bias: 2 }] }),
      { logitBias: { 42: 2 }, logitBiasText: { ' no': -100 } },
    );
    assert.deepStrictEqual(parseLogitBias('logitBias', '{"7": -1}'), { logitBias: { 7: -1 } });
    assert.deepStrictEqual(parseLogitBias('logitBias', [{ id: 3, bias: 1 }, { text: 'x', bias: '-5' }]), { logitBias: { 3: 1 }, logitBiasText: { x: -5 } });
    assert.throws(() => parseLogitBias('logitBias', [{ kind: 'id', token: 'abc', bias: 1 }]), /logitBias\[0\]\.token: must be a token id/);
    assert.throws(() => parseLogitBias('logitBias', [{ token: 'a', bias: 'x' }]), /logitBias\[0\]\.bias: must be a number/);
    const { request } = prepareGenerate({ prompt: 'p', minP: 0.1, repetitionPenalty: 1.2, repetitionWindow: '32', logitBias: { entry: [{ kind: 'text', token: 'y', bias: 3 }] } });
    assert.deepStrictEqual(request.sampler, { minP: 0.1, repetitionPenalty: 1.2, repetitionWindow: 32, logitBiasText: { y: 3 } });
  });
});
