// Plain restatements of ai00's typical and mirostat sampling, written for the tests and independent of
// engine/samplers: full softmax with Math.exp over every row (no cutoff), full sorts, no shared helpers.
// Each function takes the uniform number u of one draw, so a seeded sampler can be replayed step by step.

/** Softmax over every row, in float64. */
export function softmax(logits: ArrayLike<number>): number[] {
  const max = Math.max(...Array.from(logits));
  const e = Array.from(logits, (x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

/** The first candidate whose cumulative normalized weight reaches u (the last one if rounding leaves a gap). */
export function drawFrom(candidates: number[], weights: number[], u: number): number {
  const total = weights.reduce((a, b) => a + b, 0);
  let cum = 0;
  for (let i = 0; i < candidates.length; i++) {
    cum += weights[i] / total;
    if (u <= cum) return candidates[i];
  }
  return candidates[candidates.length - 1];
}

/**
 * Locally typical sampling: rows ordered by |surprise - entropy| (ties: lower row), at most topK of them,
 * taken until their probability passes tau (the row crossing it is kept).
 */
export function typicalCandidates(logits: ArrayLike<number>, topK: number, tau: number): number[] {
  const p = softmax(logits);
  const entropy = -p.reduce((h, pi) => h + (pi > 0 ? pi * Math.log(pi) : 0), 0);
  const order = p
    .map((pi, row) => ({ row, distance: Math.abs(-Math.log(pi) - entropy) }))
    .sort((a, b) => a.distance - b.distance || a.row - b.row)
    .map((r) => r.row)
    .slice(0, topK > 0 ? topK : undefined);
  const kept: number[] = [];
  let mass = 0;
  for (const row of order) {
    if (mass > tau) break;
    kept.push(row);
    mass += p[row];
  }
  return kept;
}

/** One typical draw: the candidates' probabilities reshaped by temperature (p^(1/T)). */
export function typicalDraw(logits: ArrayLike<number>, topK: number, tau: number, temperature: number, u: number): number {
  const p = softmax(logits);
  const kept = typicalCandidates(logits, topK, tau);
  return drawFrom(kept, kept.map((row) => Math.pow(p[row], 1 / temperature)), u);
}

/**
 * Mirostat as ai00 runs it: the rows with p >= 2^-mu, most probable first, plus the most probable row
 * below that bound; draw by probability; then mu -= eta * (surprise - tau), capped at 4 tau, where the
 * surprise is -log2 of the drawn row's share of the candidates. mu starts at 2 tau.
 */
export class ReferenceMirostat {
  mu: number;
  /** The candidates of each draw so far, for the test to inspect. */
  readonly history: number[][] = [];

  constructor(
    private readonly tau: number,
    private readonly eta: number,
  ) {
    this.mu = 2 * tau;
  }

  draw(logits: ArrayLike<number>, u: number): number {
    const p = softmax(logits);
    const byProbability = p.map((_, row) => row).sort((a, b) => p[b] - p[a] || a - b);
    const bound = Math.pow(2, -this.mu);
    const candidates = byProbability.filter((row) => p[row] >= bound);
    const below = byProbability.find((row) => p[row] < bound && p[row] > 0);
    if (below !== undefined) candidates.push(below);
    this.history.push(candidates);
    const token = drawFrom(candidates, candidates.map((row) => p[row]), u);
    const mass = candidates.reduce((s, row) => s + p[row], 0);
    const surprise = -Math.log2(p[token] / mass);
    this.mu = Math.min(this.mu - this.eta * (surprise - this.tau), 4 * this.tau);
    return token;
  }
}
