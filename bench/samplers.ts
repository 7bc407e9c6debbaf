// CPU cost of one sampling step over a full 65536-row vocabulary, per sampler kind: with the GPU doing a
// decode step in a few milliseconds, this is what bounds the scheduler at high concurrency.

import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';

export async function benchSamplers(rows = 65536): Promise<Record<string, number>> {
  // Two shapes of logits: flat (a random model: every row within reach of the top) and peaked (a trained
  // model's typical spread).
  const flat = new Float32Array(rows);
  const peaked = new Float32Array(rows);
  let s = 12345;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  for (let i = 0; i < rows; i++) {
    flat[i] = rand() * 8;
    peaked[i] = -Math.log(-Math.log(rand() + 1e-12) + 1e-12) * 2 - 10 * Math.log1p(i / 50);
  }
  const out: Record<string, number> = {};
  for (const [shape, logits] of [['flat', flat], ['peaked', peaked]] as const) {
    for (const kind of ['nucleus', 'typical', 'mirostat', 'greedy'] as const) {
      const opts = kind === 'greedy' ? { temperature: 0, seed: 1 } : { kind, seed: 1 };
      const sampler = new TokenSampler(resolveSamplerOptions(opts), rows, (id) => id);
      for (let i = 0; i < 20; i++) sampler.sample(logits);
      const n = 200;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) sampler.sample(logits);
      out[`${shape}.${kind}.msPerSample`] = +((performance.now() - t0) / n).toFixed(3);
    }
  }
  return out;
}

if (require.main === module) {
  benchSamplers().then((r) => console.log(JSON.stringify(r, null, 1)));
}
