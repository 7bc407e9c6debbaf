// bench/precision.ts bytesOnlySpeedup: the most a format with fewer weight bytes can speed up a step, printed beside
// the measured int8 / f16 ratio so a target beyond it is seen as such.

import * as assert from 'assert';
import { bytesOnlySpeedup } from '../bench/precision';

describe('bench precision: bytesOnlySpeedup', () => {
  it('is the step over the step less the saved bytes at the read rate', () => {
    // A 2.9 ms step, 1.45 GB saved, read at 4.47 TB/s: 0.324 ms saved at most.
    const b = bytesOnlySpeedup(2.9e-3, 1.45e9, 4.47e12);
    assert.ok(Math.abs(b - 2.9 / (2.9 - 1.45 / 4.47)) < 1e-9, String(b));
    assert.ok(b > 1.12 && b < 1.13, String(b));
    assert.strictEqual(bytesOnlySpeedup(1e-3, 0, 1e12), 1);
    // A step made of nothing but the saved bytes could become free.
    assert.strictEqual(bytesOnlySpeedup(1e-3, 1e9, 1e12), Infinity);
  });

  it('refuses a step or read rate of zero and negative savings', () => {
    for (const [s, b, r] of [[0, 1, 1], [1, -1, 1], [1, 1, 0]]) assert.throws(() => bytesOnlySpeedup(s, b, r), /bytesOnlySpeedup/);
  });
});
