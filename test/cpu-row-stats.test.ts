// Output 'top's row statistics on the CPU backend (engine/cpu/row-stats.ts, kernels.ts softmaxStats): the
// largest value, the count of candidates and the softmax sum, against float64, with -Infinity (masked rows),
// NaN, rows whose length is not a multiple of 4, and rows with no candidate.

import * as assert from 'assert';
import { RowStatsKernel } from '../engine/cpu/row-stats';
import { reduceTop, rowStats } from '../engine/cpu/top-logits-cpu';

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

  it('grows for longer rows and gives reduceTop the same entries as without it', () => {
    const x = row(200000, 7);
    const a = reduceTop(Float32Array.from(x), undefined, 256, (r) => k.stats(r));
    const b = reduceTop(Float32Array.from(x), undefined, 256);
    assert.deepStrictEqual(Array.from(a.rows), Array.from(b.rows));
    assert.strictEqual(a.max, b.max);
    assert.ok(Math.abs(a.logZ - b.logZ) < 1e-6 * Math.abs(b.logZ));
  });
});
