// The version registry (engine/versions.ts): every version the checkpoint reader recognizes runs on both backends.

import { strict as assert } from 'assert';
import { modelVersion, VERSIONS } from '../engine/versions';
import type { RwkvVersion } from '../engine/types';

describe('version registry', () => {
  it('has a CPU and a GPU backend for every version describeModel recognizes', () => {
    const runs: RwkvVersion[] = ['v4', 'v5', 'v6', 'v7', 'v7a', 'v7b'];
    assert.deepEqual(Object.keys(VERSIONS).sort(), runs);
    for (const v of runs) {
      assert.equal(typeof modelVersion({ version: v }).gpu, 'function', v);
      assert.equal(typeof modelVersion({ version: v }).cpu, 'function', v);
    }
  });

  it('refuses a version it does not know, listing the ones it runs (also names an Object prototype key)', () => {
    for (const v of ['v3', 'constructor', '__proto__']) {
      assert.throws(() => modelVersion({ version: v as RwkvVersion }), new RegExp(`RWKV ${v} models are not supported; the engine runs RWKV-7, RWKV-7a, RWKV-7b, RWKV-6, RWKV-5.2, RWKV-4`));
    }
  });
});
