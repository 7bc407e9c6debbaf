// Nucleus (top-k, then top-p) sampling as in ai00: keep the most probable tokens up to top_k,
// stop once the cumulative probability has passed top_p (the token crossing it is kept), then
// reshape the kept probabilities by temperature (p^(1/T)) and draw.

import { drawWeighted, topIndices } from './probability';

export function pickNucleus(probs: Float32Array, topK: number, topP: number, temperature: number, u: number): number {
  const sorted = topIndices(probs.length, topK, (i) => (probs[i] > 0 ? probs[i] : -Infinity));
  let kept = 0;
  let cum = 0;
  while (kept < sorted.length && cum <= topP) cum += probs[sorted[kept++]];
  const candidates = sorted.subarray(0, Math.max(1, kept));
  const weights = Float64Array.from(candidates, (row) => Math.pow(probs[row], 1 / temperature));
  return drawWeighted(candidates, weights, u);
}
