// The packed cache of mask-walk results (engine/grammar/walk-store.ts): bounded by two
// generations, what is in use survives a rotation, records read back exactly.

import * as assert from 'assert';
import { WalkStore } from '../engine/grammar/walk-store';

function record(store: WalkStore, key: number): number[] | null {
  const at = store.get(key);
  if (at < 0) return null;
  return Array.from(store.data.subarray(at + 1, at + 1 + store.data[at]));
}

describe('walk-result store', () => {
  it('holds at most two generations of its capacity, whatever is added', () => {
    const store = new WalkStore(1000);
    for (let key = 0; key < 5000; key++) {
      store.add(key, [key + 1, key + 2, -1 - key]);
      assert.ok(store.size <= 2 * 1000, `${store.size} words held after ${key + 1} records`);
    }
    // The oldest records are gone, the newest are there and exact.
    assert.strictEqual(record(store, 0), null);
    assert.deepStrictEqual(record(store, 4999), [5000, 5001, -5000]);
  });

  it('keeps a record that is read across rotations, and reads records back exactly', () => {
    const store = new WalkStore(64);
    store.add(7, [1, 2, 3, -9]);
    store.add(8, []);
    for (let key = 100; key < 400; key++) {
      store.add(key, [key, key]);
      // Read now and then: each read copies it into the current generation.
      if (key % 5 === 0) assert.deepStrictEqual(record(store, 7), [1, 2, 3, -9], `after key ${key}`);
    }
    assert.deepStrictEqual(record(store, 7), [1, 2, 3, -9]);
    assert.strictEqual(record(store, 8), null, 'an unread record is dropped after two rotations');
    assert.strictEqual(record(store, 12345), null);
  });
});
