// The recognizer's pair tables (engine/grammar/int-pair-index.ts): exact against a Map through
// every doubling, and a doubling spread over the sets after it instead of one rehash.

import * as assert from 'assert';
import { IntPairIndex, IntPairSet } from '../engine/grammar/int-pair-index';
import { mulberry32 } from './grammar-sampler';

describe('int pair index', () => {
  it('agrees with a Map through many doublings, values changed while slots are being moved included', () => {
    const rand = mulberry32(11);
    const index = new IntPairIndex(4);
    const want = new Map<string, number>();
    const pairs: [number, number][] = [];
    for (let k = 0; k < 60000; k++) {
      // Keys near 0, near 2^31 - 2, and repeats of earlier ones (updates).
      let a: number, b: number;
      if (pairs.length && rand() < 0.3) [a, b] = pairs[Math.floor(rand() * pairs.length)];
      else {
        a = rand() < 0.1 ? 0x7ffffffe - Math.floor(rand() * 100) : Math.floor(rand() * 5000);
        b = rand() < 0.1 ? 0x7fffffff - Math.floor(rand() * 100) : Math.floor(rand() * 5000);
        pairs.push([a, b]);
      }
      const v = Math.floor(rand() * 0x7fffffff);
      index.set(a, b, v);
      want.set(`${a},${b}`, v);
      // Every so often, everything, while a move may be under way.
      if (k % 7919 === 0) for (const [x, y] of pairs) assert.strictEqual(index.get(x, y), want.get(`${x},${y}`), `(${x}, ${y}) after ${k + 1} sets`);
      if (k % 97 === 0) assert.strictEqual(index.get(a + 1, b), want.get(`${a + 1},${b}`) ?? -1);
    }
    assert.strictEqual(index.size, want.size);
    for (const [x, y] of pairs) assert.strictEqual(index.get(x, y), want.get(`${x},${y}`));
    assert.strictEqual(index.get(5001, 5001), -1);
  });

  it('no set writes more than a few slots: a doubling moves the old table a little at a time', () => {
    const index = new IntPairIndex(16);
    let most = 0;
    for (let k = 0; k < 200000; k++) {
      const before = index.slotsWritten;
      index.set(k % 1000, k, k);
      most = Math.max(most, index.slotsWritten - before);
    }
    // One slot for the pair and at most 8 moved (a rehash at once wrote 131,072 at the last doubling).
    assert.ok(most <= 9, `${most} slots written by one set`);
    for (let k = 0; k < 200000; k += 997) assert.strictEqual(index.get(k % 1000, k), k);
  });

  it('the closure set forgets everything on clear, across growth', () => {
    const set = new IntPairSet(4);
    for (let round = 0; round < 3; round++) {
      for (let k = 0; k < 5000; k++) assert.ok(set.add(k, round), `(${k}, ${round}) is new`);
      for (let k = 0; k < 5000; k++) assert.ok(!set.add(k, round));
      set.clear();
      assert.ok(set.add(0, round), 'empty after clear');
      set.clear();
    }
  });
});
