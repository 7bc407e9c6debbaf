// Locally typical sampling as in ai00: rank tokens by how close their surprise (-ln p) is to the
// distribution's entropy, keep up to top_k of them until their probability mass passes tau, then
// apply temperature and draw.

import { drawWeighted, topIndices } from './probability';

export function pickTypical(probs: Float32Array, topK: number, tau: number, temperature: number, u: number): number {
  let entropy = 0;
  for (let i = 0; i < probs.length; i++) if (probs[i] > 0) entropy -= probs[i] * Math.log(probs[i]);
  const sorted = topIndices(probs.length, topK, (i) => (probs[i] > 0 ? -Math.abs(-Math.log(probs[i]) - entropy) : -Infinity));
  let kept = 0;
  let cum = 0;
  while (kept < sorted.length && cum <= tau) cum += probs[sorted[kept++]];
  const candidates = sorted.subarray(0, Math.max(1, kept));
  const weights = Float64Array.from(candidates, (row) => Math.pow(probs[row], 1 / temperature));
  return drawWeighted(candidates, weights, u);
}
