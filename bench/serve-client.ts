// A client process of the `serve` bench section (bench/serve.ts): connects a remote engine to the server at
// argv[2], reports ready, then for each message from the parent runs that many generations at once and
// reports the tokens it received.

import type { GenerateRequest } from '../engine/api';
import { RemoteEngine } from '../engine/remote-engine';

/** The i-th request: distinct short prompts, end of text barred so every request generates maxTokens tokens. */
export function benchRequest(i: number, maxTokens: number): GenerateRequest {
  return { prompt: `Request ${i}: the weather today is`, maxTokens, sampler: { seed: i, logitBias: { 0: -1000 } } };
}

export interface ClientReport {
  tokens: number;
  error?: string;
}

async function main(): Promise<void> {
  const engine = await RemoteEngine.connect({ url: process.argv[2] });
  process.send!({ ready: true, rss: process.memoryUsage().rss });
  process.on('message', async (m: { first: number; count: number; maxTokens: number }) => {
    try {
      const counts = await Promise.all(
        Array.from({ length: m.count }, async (_, k) => {
          let n = 0;
          for await (const e of engine.generate(benchRequest(m.first + k, m.maxTokens))) if (e.type === 'stop') n = e.completionTokens;
          return n;
        }),
      );
      process.send!({ tokens: counts.reduce((a, b) => a + b, 0) } satisfies ClientReport);
    } catch (err) {
      process.send!({ tokens: 0, error: (err as Error).message } satisfies ClientReport);
    }
  });
  process.on('disconnect', () => {
    engine.close();
    process.exit(0);
  });
}

if (require.main === module) {
  main().catch((err) => {
    process.send?.({ ready: false, error: (err as Error).message });
    process.exit(1);
  });
}
