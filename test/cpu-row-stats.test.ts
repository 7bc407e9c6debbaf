// Output 'top's row statistics on the CPU backend (engine/cpu/row-stats.ts, kernels.ts softmaxStats): the
// largest value, the count of candidates and the softmax sum, against float64, with -Infinity (masked rows), NaN,
// rows whose length is not a multiple of 4, and rows with no candidate; and the best entries (topEntries) against
// reduceTop's heap.

import * as assert from 'assert';
import { reduceTop, rowStats, topLogits } from '../engine/cpu/top-logits-cpu';
import { RowStatsKernel } from './row-stats-kernel';

function row(n: number, seed: number, scale = 12): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32 - 0.5) * scale);
}

describe('CPU row statistics for output top', () => {
  const k = new RowStatsKernel();

  it('match float64 on World-size rows and odd lengths, with masked (-Infinity) and NaN values skipped', () => {
    for (const [n, seed] of [[65536, 1], [65529, 2], [7, 3], [1, 4], [4097, 5]]) {
      const x = row(n, seed);
      for (let i = 0; i < n; i += 5) x[i] = -Infinity;
      if (n > 3) x[n - 2] = NaN;
      const got = k.stats(x);
      const ref = rowStats(x);
      assert.strictEqual(got.max, ref.max, `n=${n} max`);
      assert.strictEqual(got.finite, ref.finite, `n=${n} count`);
      assert.ok(Math.abs(got.sum - ref.sum) <= 3e-7 * ref.sum, `n=${n}: sum ${got.sum} vs ${ref.sum}`);
    }
  });

  it('a row with no candidate: max -Infinity, count 0, sum 0; the largest value in the tail is found', () => {
    assert.deepStrictEqual(k.stats(new Float32Array(13).fill(-Infinity)), { max: -Infinity, finite: 0, sum: 0 });
    assert.deepStrictEqual(k.stats(Float32Array.from([NaN, NaN, NaN, NaN, NaN])), { max: -Infinity, finite: 0, sum: 0 });
    const x = row(11, 9, 1);
    x[10] = 50;
    const got = k.stats(x);
    assert.strictEqual(got.max, 50);
    assert.ok(Math.abs(got.sum - rowStats(x).sum) < 1e-7);
  });

  it('grows for longer rows and gives the same entries as reduceTop', () => {
    const x = row(200000, 7);
    const a = topLogits(k.reduce(Float32Array.from(x), 256));
    const b = reduceTop(Float32Array.from(x), undefined, 256);
    assert.deepStrictEqual(Array.from(a.rows), Array.from(b.rows));
    assert.strictEqual(a.max, b.max);
    assert.ok(Math.abs(a.logZ - b.logZ) < 1e-6 * Math.abs(b.logZ));
  });

  // The kernel's entries (kernels.ts topEntries) replace reduceTop's heap: the same rows in the same order and
  // the same value bits, on rows that stress the order (ties, signed zeros, infinities, NaN, too few candidates).
  it("picks the same best entries as reduceTop's heap, bit for bit, ties by lower row", () => {
    const bitsOf = (v: Float32Array) => Array.from(new Uint32Array(v.buffer, v.byteOffset, v.length));
    const cases: [string, Float32Array, number][] = [
      ['World row', row(65536, 11), 256],
      ['odd length', row(65531, 12), 256],
      ['ascending (every value displaces the root)', Float32Array.from({ length: 5003 }, (_, i) => i * 0.5), 256],
      ['descending (nothing displaces)', Float32Array.from({ length: 5003 }, (_, i) => -i * 0.5), 256],
      ['few values, ties across the cut', Float32Array.from({ length: 9001 }, (_, i) => (i * 7) % 5), 256],
      ['all equal', new Float32Array(4099).fill(0.25), 256],
      ['signed zeros tie', Float32Array.from({ length: 1027 }, (_, i) => (i % 3 === 0 ? -0 : i % 3 === 1 ? 0 : -1)), 256],
      ['+Infinity, NaN and -Infinity', Float32Array.from({ length: 4098 }, (_, i) => (i % 11 === 0 ? Infinity : i % 5 === 0 ? NaN : i % 2 ? -Infinity : Math.sin(i))), 256],
      ['fewer candidates than the capacity', Float32Array.from({ length: 3001 }, (_, i) => (i % 97 === 0 ? i : -Infinity)), 256],
      ['no candidate', new Float32Array(33).fill(-Infinity), 256],
      ['capacity 1', row(1000, 13), 1],
      ['shorter than the capacity', row(5, 14), 256],
    ];
    for (const [label, x, cap] of cases) {
      const got = topLogits(k.reduce(Float32Array.from(x), cap));
      const ref = reduceTop(Float32Array.from(x), undefined, cap);
      assert.deepStrictEqual(Array.from(got.rows), Array.from(ref.rows), `${label}: rows`);
      assert.deepStrictEqual(bitsOf(got.logits), bitsOf(ref.logits), `${label}: value bits`);
      assert.strictEqual(got.finite, ref.finite, `${label}: count`);
      // (softmaxStats may give +0 where the float64 reference gives -0: the same number.)
      assert.ok(got.max === ref.max, `${label}: max ${got.max} vs ${ref.max}`);
    }
  });
});
