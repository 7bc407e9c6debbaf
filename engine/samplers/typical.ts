// Locally typical sampling as in ai00: rank tokens by how close their surprise (-ln p) is to the
// distribution's entropy, keep up to top_k of them until their probability mass passes tau, then
// apply temperature and draw.

import { Candidates, drawWeighted } from './probability';

export function pickTypical(c: Candidates, topK: number, tau: number, temperature: number, u: number): number {
  const probs = c.probs;
  let entropy = 0;
  for (let j = 0; j < c.count; j++) if (probs[j] > 0) entropy -= probs[j] * Math.log(probs[j]);
  const sorted = c.best(topK, (j) => (probs[j] > 0 ? -Math.abs(-Math.log(probs[j]) - entropy) : -Infinity));
  let kept = 0;
  let cum = 0;
  while (kept < sorted.length && cum <= tau) cum += probs[sorted[kept++]];
  const chosen = sorted.subarray(0, Math.max(1, kept));
  const weights = Float64Array.from(chosen, (j) => Math.pow(probs[j], 1 / temperature));
  return c.rows[drawWeighted(chosen, weights, u)];
}
