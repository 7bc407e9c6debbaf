// The upload bound of `rwkv-flow serve` (stateBytesBound) admits every state the engine itself would load: for a
// model whose state grows (RWKV-7b), a conversation saved at the operator's context limit carries a row per token,
// which the bound must count, or a legitimately saved 7b conversation is refused with 413 past a few hundred tokens.

import { strict as assert } from 'assert';
import { stateBytesBound } from '../engine/server/engine-routes';
import { stateSourceBound } from '../engine/state-file';
import { stateFloats } from '../engine/state-layout';
import { deaRowFloats } from '../engine/rwkv7/dea-sizes';
import { DEFAULT_MAX_CONTEXT } from '../engine/state-shape';
import type { ModelInfo } from '../engine/types';

function info(version: string): ModelInfo & { adapter: string } {
  return { version, nLayer: 12, nEmbd: 768, nHead: 12, headSize: 64, vocabSize: 65536, ffnDim: 3072, loraDims: { w: 64, a: 64, v: 32, g: 128 }, adapter: 'cpu' } as ModelInfo & { adapter: string };
}

describe('serve: the upload bound of a state counts a growing state\'s rows', () => {
  for (const maxContext of [DEFAULT_MAX_CONTEXT, 100_000]) {
    it(`RWKV-7b, maxContext ${maxContext}: at least the engine's own bound of a state at the limit`, () => {
      const i = info('v7b');
      const shape = { stateSize: stateFloats(i), stateRowFloats: deaRowFloats(i), maxStateRows: maxContext };
      const engineBound = stateSourceBound(i, shape);
      const bound = maxContext === DEFAULT_MAX_CONTEXT ? stateBytesBound(i) : stateBytesBound(i, maxContext);
      assert.ok(bound >= engineBound, `upload bound ${bound} < engine bound ${engineBound}`);
      // …and not far above it: the body is read into memory before the engine's exact check.
      assert.ok(bound < 2 * engineBound, `upload bound ${bound} far above the engine's ${engineBound}`);
    });
  }

  it('a fixed-size state (RWKV-7) keeps its bound, whatever maxContext says', () => {
    const i = info('v7');
    assert.equal(stateBytesBound(i, 100_000), stateBytesBound(i));
    assert.ok(stateBytesBound(i) >= stateSourceBound(i, stateFloats(i)));
  });
});
