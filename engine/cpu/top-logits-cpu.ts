// Output 'top' on the CPU backend: the same result the GPU reduction (rwkv7/top-logits.ts,
// shaders/top_logits.wgsl) gives, computed on a logits row already in host memory. Rows the grammar forbids
// become -Infinity, then the sparse adjustments are added; the result keeps the `capacity` largest values
// (all finite ones when fewer) best first with ties by lower row, the row's max, ln of its softmax normalizer
// and its count of finite values (NaN and -Infinity carry no probability and are never candidates).

import type { LogitAdjust, TopLogits } from '../types';
import type { RowReduction, RowStats } from './row-stats';

/** Throws when an adjustment is malformed (the messages match the GPU backend's). */
export function checkLogitAdjust(adjust: LogitAdjust | undefined, job: number, V: number): void {
  if (!adjust) return;
  const { rows, deltas, allowed } = adjust;
  const words = Math.ceil(V / 32);
  if (allowed && allowed.length !== words)
    throw new RangeError(`job ${job}: adjust.allowed has ${allowed.length} words; a bitset over ${V} rows has ${words}`);
  if (rows.length !== deltas.length) throw new Error(`job ${job}: adjust has ${rows.length} rows but ${deltas.length} deltas`);
  const seen = new Set<number>();
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (!(r >= 0 && r < V)) throw new RangeError(`job ${job}: adjust row ${r} is outside the vocabulary 0..${V - 1}`);
    if (seen.has(r)) throw new Error(`job ${job}: adjust row ${r} appears twice`);
    if (Number.isNaN(deltas[i]) || deltas[i] === Infinity) throw new RangeError(`job ${job}: adjust delta for row ${r} is ${deltas[i]}`);
    seen.add(r);
  }
}

/** Masks the rows the grammar forbids (-Infinity), then adds the sparse adjustments, in place. */
export function applyAdjust(row: Float32Array, adjust: LogitAdjust | undefined): void {
  const allowed = adjust?.allowed;
  if (allowed) {
    const V = row.length;
    for (let w = 0; w < allowed.length; w++) {
      const bits = allowed[w];
      if (bits === 0xffffffff) continue;
      const end = Math.min(V, (w + 1) * 32);
      for (let i = w * 32; i < end; i++) if (((bits >>> (i & 31)) & 1) === 0) row[i] = -Infinity;
    }
  }
  if (adjust) for (let i = 0; i < adjust.rows.length; i++) row[adjust.rows[i]] += adjust.deltas[i];
}

/** Output 'top' from a row's reduction: the normalizer as ln of the softmax sum. */
export function topLogits(r: RowReduction): TopLogits {
  return { kind: 'top', rows: r.rows, logits: r.logits, max: r.max, logZ: r.finite > 0 ? Math.log(r.sum) : -Infinity, finite: r.finite };
}

/**
 * Reduces `row` (modified in place: masked and adjusted) to its top `capacity` entries, the sum in float64 and the
 * entries by the heap below: the reference the compute thread's kernels (row-stats.ts reduceRow) must equal
 * (test/cpu-row-stats.test.ts).
 */
export function reduceTop(row: Float32Array, adjust: LogitAdjust | undefined, capacity: number): TopLogits {
  const V = row.length;
  applyAdjust(row, adjust);
  // Max and count of candidates, then the normalizer.
  const { max, finite, sum } = rowStats(row);

  // The `capacity` best in a min-heap keyed by value: rows arrive in ascending order, so an equal value never
  // displaces an entry, which keeps ties by the lower row.
  const cap = Math.min(capacity, finite);
  const hv = new Float32Array(cap);
  const hr = new Int32Array(cap);
  let size = 0;
  for (let i = 0; i < V && cap > 0; i++) {
    const x = row[i];
    if (!(x > -Infinity)) continue;
    if (size < cap) {
      // Sift up.
      let j = size++;
      while (j > 0) {
        const parent = (j - 1) >> 1;
        if (hv[parent] < x || (hv[parent] === x && hr[parent] > i)) break; // the parent is already the worse
        hv[j] = hv[parent];
        hr[j] = hr[parent];
        j = parent;
      }
      hv[j] = x;
      hr[j] = i;
    } else if (x > hv[0]) {
      // Replace the worst (smallest value, then highest row) and sift down.
      let j = 0;
      for (;;) {
        const a = 2 * j + 1;
        if (a >= cap) break;
        const b = a + 1;
        let c = a;
        if (b < cap && (hv[b] < hv[a] || (hv[b] === hv[a] && hr[b] > hr[a]))) c = b;
        if (hv[c] > x || (hv[c] === x && hr[c] < i)) break;
        hv[j] = hv[c];
        hr[j] = hr[c];
        j = c;
      }
      hv[j] = x;
      hr[j] = i;
    }
  }
  const order = Array.from({ length: size }, (_, j) => j).sort((a, b) => hv[b] - hv[a] || hr[a] - hr[b]);
  const rows = new Int32Array(size);
  const logits = new Float32Array(size);
  order.forEach((j, n) => {
    rows[n] = hr[j];
    logits[n] = hv[j];
  });
  return { kind: 'top', rows, logits, max, logZ: finite > 0 ? Math.log(sum) : -Infinity, finite };
}

/** Max, count of values above -Infinity and sum of exp(x - max) over them, in float64. */
export function rowStats(row: Float32Array): RowStats {
  const V = row.length;
  let max = -Infinity;
  let finite = 0;
  for (let i = 0; i < V; i++) {
    const x = row[i];
    if (x > -Infinity) {
      finite++;
      if (x > max) max = x;
    }
  }
  let sum = 0;
  if (finite > 0) for (let i = 0; i < V; i++) if (row[i] > -Infinity) sum += Math.exp(row[i] - max);
  return { max, finite, sum };
}
