// GrowingRows (engine/cpu/growing-rows.ts): a slot's rows grow by doubling, but never past the operator's context
// limit, so a maxContext that is not a power of two does not cost up to twice its memory per slot.

import { strict as assert } from 'assert';
import { GrowingRows } from '../engine/cpu/growing-rows';

describe('GrowingRows: capacity bounded by the context limit', () => {
  it('doubling stops at maxRows rows (5000 rows of 8 floats, not 8192)', () => {
    const g = new GrowingRows(1, 8, 5000);
    for (let rows = 1; rows <= 5000; rows++) {
      g.reserve(0, 1);
      g.commit(0, rows);
    }
    assert.equal(g.count(0), 5000);
    assert.equal(g.buffer(0).length, 5000 * 8);
  });

  it('a write of rows up to the limit takes exactly their room; the first reserve no more than the limit', () => {
    const g = new GrowingRows(2, 4, 10);
    g.reserve(0, 1);
    assert.equal(g.buffer(0).length, 10 * 4);
    g.write(1, new Float32Array(7 * 4).fill(1));
    assert.equal(g.count(1), 7);
    assert.ok(g.buffer(1).length <= 10 * 4);
    assert.deepEqual(Array.from(g.read(1)), new Array(28).fill(1));
  });

  it('without a limit it doubles as before', () => {
    const g = new GrowingRows(1, 2);
    g.reserve(0, 1);
    assert.equal(g.buffer(0).length, 32);
    g.commit(0, 16);
    g.reserve(0, 1);
    assert.equal(g.buffer(0).length, 64);
  });
});
