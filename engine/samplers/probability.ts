// Numeric helpers shared by the samplers. They work on one slot's logits over the model's rows
// (up to 65536), so they avoid full sorts where a bounded selection does.

/**
 * Rows whose logit is within this many nats of the best one. Everything further down weighs at most
 * 65536 * e^-30 ≈ 6e-9 of the total together, below f32 rounding, so dropping it changes no draw.
 */
const LOG_CUTOFF = 30;

/** The rows that carry probability and their probabilities (normalized over them), in row order. */
export class Candidates {
  rows: Int32Array;
  probs: Float64Array;
  count = 0;

  constructor(capacity: number) {
    this.rows = new Int32Array(capacity);
    this.probs = new Float64Array(capacity);
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
    let sum = 0;
    for (let j = 0; j < n; j++) {
      const e = Math.exp(x[rows[j]] - max);
      probs[j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j < n; j++) probs[j] *= inv;
    this.count = n;
    return true;
  }

  /** Candidate positions (not rows) of the k best by `score(position)`, best first; k <= 0 means all. */
  best(k: number, score: (j: number) => number): Int32Array {
    return topIndices(this.count, k, score);
  }
}

/** Softmax in place; -Infinity logits get probability 0. Returns false when every logit is -Infinity. */
export function softmaxInPlace(x: Float32Array): boolean {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i];
  if (max === -Infinity) return false;
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    const e = Math.exp(x[i] - max);
    x[i] = e;
    sum += e;
  }
  const inv = 1 / sum;
  for (let i = 0; i < x.length; i++) x[i] *= inv;
  return true;
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
 * Indices of the k largest `score(i)` among i in [0, n) with score > -Infinity, best first
 * (ties: lower index first). k <= 0 means all. Bounded min-heap, O(n log k).
 */
export function topIndices(n: number, k: number, score: (i: number) => number): Int32Array {
  const limit = k <= 0 || k > n ? n : k;
  const heapIdx = new Int32Array(limit);
  const heapVal = new Float64Array(limit);
  let size = 0;
  // "a is worse than b": smaller score, or same score and larger index.
  const worse = (va: number, ia: number, vb: number, ib: number) => va < vb || (va === vb && ia > ib);
  const siftDown = (at: number) => {
    for (;;) {
      const l = 2 * at + 1;
      const r = l + 1;
      let m = at;
      if (l < size && worse(heapVal[l], heapIdx[l], heapVal[m], heapIdx[m])) m = l;
      if (r < size && worse(heapVal[r], heapIdx[r], heapVal[m], heapIdx[m])) m = r;
      if (m === at) return;
      [heapVal[m], heapVal[at]] = [heapVal[at], heapVal[m]];
      [heapIdx[m], heapIdx[at]] = [heapIdx[at], heapIdx[m]];
      at = m;
    }
  };
  for (let i = 0; i < n; i++) {
    const v = score(i);
    if (!(v > -Infinity)) continue;
    if (size < limit) {
      let at = size++;
      heapVal[at] = v;
      heapIdx[at] = i;
      while (at > 0) {
        const p = (at - 1) >> 1;
        if (!worse(heapVal[at], heapIdx[at], heapVal[p], heapIdx[p])) break;
        [heapVal[p], heapVal[at]] = [heapVal[at], heapVal[p]];
        [heapIdx[p], heapIdx[at]] = [heapIdx[at], heapIdx[p]];
        at = p;
      }
    } else if (worse(heapVal[0], heapIdx[0], v, i)) {
      heapVal[0] = v;
      heapIdx[0] = i;
      siftDown(0);
    }
  }
  const order = Array.from({ length: size }, (_, j) => j);
  order.sort((a, b) => heapVal[b] - heapVal[a] || heapIdx[a] - heapIdx[b]);
  return Int32Array.from(order, (j) => heapIdx[j]);
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
