// Prompts that arrive while other requests decode — as requests from several processes reach a server one by
// one — share a step's prefill budget (chunkSize tokens) instead of taking a step each.

import * as assert from 'assert';
import type { GenerateEvent } from '../engine/api';
import { byteTokenizer } from './fake-backend';
import { fakeEngine, until } from './serve-fixtures';

async function drain(it: AsyncIterable<GenerateEvent>): Promise<void> {
  for await (const _ of it);
}

describe('scheduler: prompts arriving during decoding', function () {
  this.timeout(30000);

  it('short prompts waiting together are prefilled in one step, within the chunk budget', async () => {
    const { engine, fake } = fakeEngine({ slots: 8 }, { chunkSize: 16 });
    try {
      const running = drain(engine.generate({ prompt: 'already decoding', maxTokens: 200, sampler: { logitBias: { 0: -1000 } } }));
      await until(() => engine.metrics().decodeTokens > 2, 'the first request to decode');
      const seen = fake.calls.length;
      // Five 5-token prompts (25 tokens) against a 16-token budget: three fit the first step, partly the third.
      const prompts = ['aaaaa', 'bbbbb', 'ccccc', 'ddddd', 'eeeee'];
      await Promise.all(prompts.map((p) => drain(engine.generate({ prompt: p, maxTokens: 2 }))));
      const chunkSteps = fake.calls.slice(seen).map((jobs) => jobs.filter((j) => j.tokens.length > 1));
      const withChunks = chunkSteps.filter((c) => c.length > 0);
      for (const c of withChunks) assert.ok(c.reduce((n, j) => n + j.tokens.length, 0) <= 16, 'a step went over the chunk budget');
      assert.ok(withChunks[0].length >= 3, `the first prefill step carried ${withChunks[0].length} prompts`);
      const prefilled = withChunks.flat().reduce((n, j) => n + j.tokens.length, 0);
      // Every prompt token fed once (a prompt's last token may go alone as a single-token job).
      assert.ok(prefilled <= prompts.length * byteTokenizer.encode('aaaaa').length);
      await running;
    } finally {
      await engine.close();
    }
  });
});
