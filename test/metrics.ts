import { strict as assert } from 'assert';

/** Largest per-row relative L2 error of `got` against `want`, rows of width `width`. */
export function worstRelL2(got: Float32Array, want: Float32Array, width: number): number {
  assert.equal(got.length, want.length, 'length mismatch');
  let worst = 0;
  for (let r = 0; r < want.length / width; r++) {
    let num = 0;
    let den = 0;
    for (let i = r * width; i < (r + 1) * width; i++) {
      num += (got[i] - want[i]) ** 2;
      den += want[i] ** 2;
    }
    worst = Math.max(worst, Math.sqrt(num / Math.max(den, 1e-30)));
  }
  return worst;
}
