// The version registry (engine/versions.ts): every version the checkpoint reader recognizes has a GPU backend, and
// what the CPU backend runs decides device choice and its refusal.

import { strict as assert } from 'assert';
import { cpuRuns, modelVersion, VERSIONS } from '../engine/versions';
import type { RwkvVersion } from '../engine/types';

describe('version registry', () => {
  it('has a GPU backend for every version describeModel recognizes but RWKV-7b, which it refuses saying why', () => {
    const runs: RwkvVersion[] = ['v4', 'v5', 'v6', 'v7', 'v7a'];
    assert.deepEqual(Object.keys(VERSIONS).sort(), runs);
    for (const v of runs) assert.equal(typeof modelVersion({ version: v }).gpu, 'function', v);
    assert.throws(() => modelVersion({ version: 'v7b' }), /RWKV-7b \("DEA"\) models are not supported yet: their attention state grows by one cached row per token/);
  });

  it('says which versions the CPU backend runs, naming them when it does not', () => {
    assert.deepEqual(cpuRuns({ version: 'v7' }), { ok: true });
    assert.deepEqual(cpuRuns({ version: 'v7a' }), { ok: true });
    for (const v of ['v4', 'v5', 'v6'] as const) {
      assert.deepEqual(cpuRuns({ version: v }), { ok: false, why: `the CPU backend runs RWKV-7, RWKV-7a models so far, this one is RWKV ${v}` });
    }
  });

  it('refuses a version it does not know, listing the ones it runs (also names an Object prototype key)', () => {
    for (const v of ['v3', 'constructor', '__proto__']) {
      assert.throws(() => modelVersion({ version: v as RwkvVersion }), new RegExp(`RWKV ${v} models are not supported; the engine runs RWKV-7, RWKV-7a, RWKV-6, RWKV-5.2, RWKV-4`));
    }
  });
});
