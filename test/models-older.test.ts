// RWKV-4, RWKV-5.2 and RWKV-6 through the whole engine (scheduler, 'top' decode outputs, batching, conversation
// files, the prefix cache) on both backends, WebGPU and CPU, with the tiny golden models: the scheduler and
// samplers know neither the version nor the backend.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { GenerateEvent } from '../engine/api';
import { createBackend, type Backend } from '../engine/backend';
import { RwkvEngine } from '../engine/engine';
import { WorldTokenizer } from '../engine/tokenizer';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

const greedy = { temperature: 0, presencePenalty: 0, frequencyPenalty: 0, logitBias: { 0: -Infinity } };

async function tokensOf(it: AsyncIterable<GenerateEvent>): Promise<number[]> {
  const out: number[] = [];
  for await (const e of it) if (e.type === 'delta') out.push(...e.tokens);
  return out;
}

for (const device of ['gpu', 'cpu'] as const) for (const name of ['v6-tiny', 'v5-tiny', 'v4-tiny']) {
  describe(`engine on ${name} [${device}]`, function () {
    this.timeout(300000);
    const model = path.join(GOLDEN, `${name}.pth`);
    const tokenizer = WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));
    const backends: Backend[] = [];
    let stateDir: string;
    before(function () {
      requireGolden(this, model);
      stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-older-'));
    });
    after(() => {
      backends.forEach((b) => b.dispose());
      if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
    });
    const engine = async (slots: number, chunkSize: number) => {
      const backend = await createBackend({ model, slots, precision: 'f32', device });
      assert.strictEqual(backend.adapterName.startsWith('CPU: '), device === 'cpu');
      backends.push(backend);
      return new RwkvEngine({ backend, tokenizer, config: { chunkSize, stateDir }, cacheMinTokens: 8, compileConstraint: null });
    };

    it('greedy tokens batched (top outputs) equal each request alone, and the last-row logits argmax', async () => {
      const prompts = ['Hello there', 'The capital of France is', 'a'];
      const solo = await engine(1, 64);
      const alone: number[][] = [];
      for (const prompt of prompts) alone.push(await tokensOf(solo.generate({ prompt, maxTokens: 6, sampler: greedy })));
      const batch = await engine(3, 4);
      const together = await Promise.all(prompts.map((prompt) => tokensOf(batch.generate({ prompt, maxTokens: 6, sampler: greedy }))));
      assert.deepStrictEqual(together, alone);
      // The first greedy token is the argmax of the prompt's last logits row (token 0 is biased away).
      const be = backends[0];
      be.resetState(0);
      const [row] = await be.run([{ slot: 0, tokens: tokenizer.encode(prompts[1]), output: 'last' }]);
      let best = 1;
      for (let i = 1; i < row!.length; i++) if (row![i] > row![best]) best = i;
      assert.strictEqual(alone[1][0], best);
      await Promise.all([solo.close(), batch.close()]);
    });

    it('a saved conversation, loaded as a state and continued, equals the whole prompt; a repeated prompt reuses the prefix cache', async () => {
      const head = 'The quick brown fox jumps over the lazy dog.\n';
      const tail = 'Then it ran';
      // The split must not change the tokens, or the two runs would feed different rows.
      assert.deepStrictEqual(tokenizer.encode(head + tail), [...tokenizer.encode(head), ...tokenizer.encode(tail)]);
      const e = await engine(2, 8);
      const whole = await tokensOf(e.generate({ prompt: head + tail, maxTokens: 6, sampler: greedy }));
      const saved = await e.saveConversation(head, 'head.cbor');
      assert.strictEqual(saved.tokens, tokenizer.encode(head).length);
      await e.loadConversation('head.cbor', 'head');
      assert.deepStrictEqual(await tokensOf(e.generate({ prompt: tail, state: 'head', maxTokens: 6, sampler: greedy })), whole);
      const cachedBefore = e.stats.cachedPromptTokens;
      assert.deepStrictEqual(await tokensOf(e.generate({ prompt: head + tail, maxTokens: 6, sampler: greedy })), whole);
      assert.ok(e.stats.cachedPromptTokens > cachedBefore, 'the repeated prompt did not start from a cached prefix');
      await e.close();
    });
  });
}
