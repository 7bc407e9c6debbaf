// RWKV-4, RWKV-5.2 and RWKV-6 through the whole engine (scheduler, 'top' decode outputs, batching) on the real WebGPU
// backend with the tiny golden models: the scheduler and samplers do not know the version.

import * as assert from 'assert';
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

for (const name of ['v6-tiny', 'v5-tiny', 'v4-tiny']) {
  describe(`engine on ${name}`, function () {
    this.timeout(300000);
    const model = path.join(GOLDEN, `${name}.pth`);
    const tokenizer = WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));
    const backends: Backend[] = [];
    before(function () {
      requireGolden(this, model);
    });
    after(() => backends.forEach((b) => b.dispose()));
    const engine = async (slots: number, chunkSize: number) => {
      const backend = await createBackend({ model, slots, precision: 'f32' });
      backends.push(backend);
      return new RwkvEngine({ backend, tokenizer, config: { chunkSize }, cacheMinTokens: 8, compileConstraint: null });
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
  });
}
