// Nucleus (top-k, then top-p) sampling as in ai00: keep the most probable tokens up to top_k,
// stop once the cumulative probability has passed top_p (the token crossing it is kept), then
// reshape the kept probabilities by temperature (p^(1/T)) and draw.

import { Candidates, drawWeighted } from './probability';

export function pickNucleus(c: Candidates, topK: number, topP: number, temperature: number, u: number): number {
  const probs = c.probs;
  const sorted = c.mostProbable(topK);
  let kept = 0;
  let cum = 0;
  while (kept < sorted.length && cum <= topP) cum += probs[sorted[kept++]];
  const chosen = sorted.subarray(0, Math.max(1, kept));
  const weights = Float64Array.from(chosen, (j) => Math.pow(probs[j], 1 / temperature));
  return c.rows[drawWeighted(chosen, weights, u)];
}
