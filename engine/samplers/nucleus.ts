// Nucleus (top-k, then top-p) sampling as in ai00: keep the most probable tokens up to top_k,
// stop once the cumulative probability has passed top_p (the token crossing it is kept), then
// reshape the kept probabilities by temperature (p^(1/T)) and draw.

import { Candidates, drawUntilMass } from './probability';

export function pickNucleus(c: Candidates, topK: number, topP: number, temperature: number, u: number): number {
  return drawUntilMass(c, c.mostProbable(topK), topP, temperature, u);
}
