// Locally typical sampling as in ai00: rank tokens by how close their surprise (-ln p) is to the
// distribution's entropy, keep up to top_k of them until their probability mass passes tau, then
// apply temperature and draw.

import { Candidates, drawUntilMass, topK } from './probability';

export function pickTypical(c: Candidates, topKCount: number, tau: number, temperature: number, u: number): number {
  const { probs, offsets, logZ, count } = c;
  // ln p = offset - logZ, so the entropy and every surprise come without a log per row.
  let entropy = logZ;
  for (let j = 0; j < count; j++) entropy -= probs[j] * offsets[j];
  const closeness = new Float64Array(count);
  for (let j = 0; j < count; j++) closeness[j] = probs[j] > 0 ? -Math.abs(logZ - offsets[j] - entropy) : -Infinity;
  return drawUntilMass(c, topK(closeness, count, topKCount), tau, temperature, u);
}
