// Numeric helpers shared by the samplers. They work on one slot's logits over the model's rows
// (up to 65536), so they avoid full sorts where a bounded selection does.

import type { TopLogits } from '../types';

/**
 * Rows whose logit is within this many nats of the best one. Everything further down weighs at most
 * 65536 * e^-30 ≈ 6e-9 of the total together, below f32 rounding, so dropping it changes no draw.
 */
const LOG_CUTOFF = 30;

/** Positions 0, 1, 2, …: mostProbable() of candidates stored best first (shared, never written). */
const BEST_FIRST = Int32Array.from({ length: 512 }, (_, i) => i);

const POW2_NEG = Float64Array.from({ length: 64 }, (_, k) => Math.pow(2, -k));

/**
 * e^d for d in [-LOG_CUTOFF, 0], relative error under 1e-6 (2^t as a table power of two times a degree-7
 * polynomial of the fraction): 2.5x faster than Math.exp, and this runs over every row every step.
 */
function expNonPositive(d: number): number {
  const t = d * 1.4426950408889634;
  const n = Math.floor(t);
  const f = t - n;
  const p =
    1 +
    f * (0.6931471805599453 + f * (0.2402265069591007 + f * (0.05550410866482158 + f * (0.009618129107628477 +
      f * (0.0013333558146428443 + f * (0.00015403530393381606 + f * 0.000015252733804059841))))));
  return p * POW2_NEG[-n];
}

/** The rows that carry probability and their probabilities (normalized over them), in row order. */
export class Candidates {
  rows: Int32Array;
  probs: Float64Array;
  /** logit - max logit of each candidate, so ln p = offset - logZ without a log per row. */
  offsets: Float64Array;
  /** ln of the softmax normalizer, relative to the max logit. */
  logZ = 0;
  count = 0;
  /** Positions best first (ties by lower row), when known from how the candidates were made. */
  private presorted: Int32Array | null = null;

  constructor(capacity: number) {
    this.rows = new Int32Array(capacity);
    this.probs = new Float64Array(capacity);
    this.offsets = new Float64Array(capacity);
  }

  /**
   * Softmax restricted to the rows within LOG_CUTOFF of the maximum: exp() only for those, which for a
   * confident model are far fewer than the vocabulary. Returns false when every logit is -Infinity (or NaN).
   */
  fromLogits(x: Float32Array): boolean {
    let max = -Infinity;
    for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i];
    if (max === -Infinity || Number.isNaN(max)) return false;
    const threshold = max - LOG_CUTOFF;
    const rows = this.rows;
    let n = 0;
    for (let i = 0; i < x.length; i++) if (x[i] >= threshold) rows[n++] = i;
    const probs = this.probs;
    const offsets = this.offsets;
    let sum = 0;
    for (let j = 0; j < n; j++) {
      const d = x[rows[j]] - max;
      const e = expNonPositive(d);
      offsets[j] = d;
      probs[j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j < n; j++) probs[j] *= inv;
    this.logZ = Math.log(sum);
    this.count = n;
    this.presorted = null;
    return true;
  }

  /**
   * The same from a row reduced on the GPU: its largest logits and the normalizer over the whole row.
   * Candidates keep the LOG_CUTOFF, so draws match those from the full row. `order` 'row' stores them in row order,
   * as fromLogits does, for what sums over all candidates in storage order (min_p's renormalisation, mirostat);
   * 'best' keeps the top's own order (best first) and skips the sort: a draw that only walks mostProbable() —
   * nucleus without min_p, the notes of log-probabilities — reads the same values in the same order either way.
   */
  fromTop(top: TopLogits, order: 'row' | 'best' = 'row'): boolean {
    if (top.finite === 0) return false;
    // Best first, so the ones within LOG_CUTOFF are a prefix.
    const floor = top.max - LOG_CUTOFF;
    let n = 0;
    while (n < top.logits.length && top.logits[n] >= floor) n++;
    if (n > BEST_FIRST.length) throw new RangeError(`a top result of ${n} candidates exceeds ${BEST_FIRST.length}`);
    // 'row': into row order through one packed native sort of u32 (row * 512 + position; rows < 2^23, positions
    // < 512), 3–4× faster than the same keys as f64; candidate i is then top entry packed[i] & 511. 'best': entry i.
    let packed: Uint32Array | null = null;
    if (order === 'row') {
      packed = new Uint32Array(n);
      for (let j = 0; j < n; j++) {
        if (top.rows[j] >= 1 << 23) throw new RangeError(`row ${top.rows[j]} of a top result is beyond 2^23`);
        packed[j] = top.rows[j] * 512 + j;
      }
      packed.sort();
    }
    // The top arrives best first with ties by lower row: the order mostProbable would compute.
    const presorted = packed ? new Int32Array(n) : BEST_FIRST.subarray(0, n);
    for (let i = 0; i < n; i++) {
      const j = packed ? packed[i] & 511 : i;
      if (packed) presorted[j] = i;
      const d = top.logits[j] - top.max;
      this.rows[i] = top.rows[j];
      this.offsets[i] = d;
      this.probs[i] = Math.exp(d - top.logZ);
    }
    this.logZ = top.logZ;
    this.count = n;
    this.presorted = presorted;
    return n > 0;
  }

  /**
   * Keeps only the candidates whose logit is at least `floor` below the best one's (min_p: floor = ln minP),
   * in row order, with their probabilities renormalised over what is kept.
   */
  keepAbove(floor: number): void {
    const { rows, offsets, probs } = this;
    let n = 0;
    for (let j = 0; j < this.count; j++) {
      if (offsets[j] < floor) continue;
      rows[n] = rows[j];
      offsets[n] = offsets[j];
      n++;
    }
    let sum = 0;
    for (let j = 0; j < n; j++) sum += probs[j] = Math.exp(offsets[j]);
    for (let j = 0; j < n; j++) probs[j] /= sum;
    this.logZ = Math.log(sum);
    this.count = n;
    this.presorted = null;
  }

  /** Candidate positions of the k most probable, best first; k <= 0 means all. */
  mostProbable(k: number): Int32Array {
    if (this.presorted) return this.presorted.subarray(0, k <= 0 ? this.count : Math.min(k, this.count));
    return topK(this.probs, this.count, k);
  }
}

/** Index of the largest value (first one on ties); -1 when all are -Infinity or NaN. */
export function argmax(x: ArrayLike<number>): number {
  let best = -1;
  let bestValue = -Infinity;
  for (let i = 0; i < x.length; i++) {
    if (x[i] > bestValue) {
      bestValue = x[i];
      best = i;
    }
  }
  return best;
}

/**
 * Indices of the k largest of values[0..n) that are > -Infinity, best first (ties: lower index first);
 * k <= 0 means all. A bounded min-heap: most of a vocabulary fails the one comparison with the heap's
 * smallest, so this is close to a single pass.
 */
export function topK(values: Float64Array, n: number, k: number): Int32Array {
  const limit = k <= 0 || k > n ? n : k;
  const heap = new Int32Array(limit); // indices; heap[0] is the worst kept
  let size = 0;
  // a is worse than b: smaller value, or equal value and larger index.
  const worse = (a: number, b: number) => values[a] < values[b] || (values[a] === values[b] && a > b);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (!(v > -Infinity)) continue;
    if (size < limit) {
      let at = size++;
      while (at > 0) {
        const parent = (at - 1) >> 1;
        if (!worse(i, heap[parent])) break;
        heap[at] = heap[parent];
        at = parent;
      }
      heap[at] = i;
    } else if (worse(heap[0], i)) {
      let at = 0;
      for (;;) {
        const l = 2 * at + 1;
        if (l >= size) break;
        const r = l + 1;
        const m = r < size && worse(heap[r], heap[l]) ? r : l;
        if (!worse(heap[m], i)) break;
        heap[at] = heap[m];
        at = m;
      }
      heap[at] = i;
    }
  }
  return Int32Array.from(Array.from(heap.subarray(0, size)).sort((a, b) => values[b] - values[a] || a - b));
}

/**
 * Draw from candidates with the given (unnormalized, non-negative) weights: the first whose
 * cumulative share reaches u, falling back to the first candidate (as ai00 does).
 */
export function drawWeighted(candidates: Int32Array, weights: Float64Array, u: number): number {
  let sum = 0;
  for (let i = 0; i < weights.length; i++) sum += weights[i];
  if (!(sum > 0)) return candidates[0];
  let cum = 0;
  for (let i = 0; i < candidates.length; i++) {
    cum += weights[i] / sum;
    if (u <= cum) return candidates[i];
  }
  return candidates[candidates.length - 1];
}

/**
 * The tail nucleus and typical sampling share: take candidates in `order` until their probability passes
 * `mass` (the one crossing it is kept, and at least one is), reshape by temperature (p^(1/T)), draw, and
 * return the drawn row.
 */
export function drawUntilMass(c: Candidates, order: Int32Array, mass: number, temperature: number, u: number): number {
  const probs = c.probs;
  let kept = 0;
  let cum = 0;
  while (kept < order.length && cum <= mass) cum += probs[order[kept++]];
  const chosen = order.subarray(0, Math.max(1, kept));
  const weights = Float64Array.from(chosen, (j) => Math.pow(probs[j], 1 / temperature));
  return c.rows[drawWeighted(chosen, weights, u)];
}
