// Mirostat (v2-style, as in ai00): keep tokens whose surprise (-log2 p) is within the running
// bound mu (plus the first one beyond it), draw among them, and move mu toward the target
// surprise tau by the learning rate eta. mu starts at 2*tau and is capped at 4*tau.

import { Candidates, drawWeighted } from './probability';

export class MirostatState {
  private maxSurprise: number;

  constructor(
    private readonly tau: number,
    private readonly eta: number,
  ) {
    this.maxSurprise = 2 * tau;
  }

  /**
   * The most candidates the next pick can keep: at most 2^mu tokens have p >= 2^-mu (probabilities sum to
   * 1), plus the first one below. When this fits a 'top' result, drawing from it is exact.
   */
  get maxCandidates(): number {
    return Math.floor(Math.pow(2, this.maxSurprise)) + 1;
  }

  pick(c: Candidates, u: number): number {
    const probs = c.probs;
    const threshold = Math.pow(2, -this.maxSurprise);
    // Candidates: every token at or above the threshold, plus the most probable one below it.
    const above: number[] = [];
    let bestBelow = -1;
    for (let i = 0; i < c.count; i++) {
      const p = probs[i];
      if (p >= threshold) above.push(i);
      else if (p > 0 && (bestBelow < 0 || p > probs[bestBelow])) bestBelow = i;
    }
    above.sort((a, b) => probs[b] - probs[a] || a - b);
    if (bestBelow >= 0) above.push(bestBelow);
    const candidates = Int32Array.from(above);
    const weights = Float64Array.from(candidates, (row) => probs[row]);
    const token = drawWeighted(candidates, weights, u);
    let mass = 0;
    for (let i = 0; i < weights.length; i++) mass += weights[i];
    const surprise = Math.log2(mass) - Math.log2(probs[token]);
    this.maxSurprise = Math.min(this.maxSurprise - this.eta * (surprise - this.tau), 4 * this.tau);
    return c.rows[token];
  }
}
