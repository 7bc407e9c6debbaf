// The CPU backend's layer norm with token shift split over threads by tokens (kernels.ts `lnShiftTokens`,
// thread-pool.ts `lnShift`): every share gives the bits of one pass over all tokens, also when a share starts
// inside a slot's tokens (its previous token normalized again into the thread's scratch) or at a slot's first
// token (the slot's saved shift state).

import { strict as assert } from 'assert';
import { instantiateKernels, kernelModule } from '../engine/cpu/wasm-kernels';
import { ThreadPool } from '../engine/cpu/thread-pool';

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe('CPU layer norm and token shift split by tokens', () => {
  const T = 29;
  const C = 40;
  const M = 3;
  const region = T * C + 8;
  // Byte addresses in one 1 MiB memory.
  const X = 65536;
  const LN = X + T * C * 4;
  const XN = LN + 2 * C * 4;
  const PREV = XN + T * C * 4;
  const MIX = PREV + T * 4;
  const OUT = MIX + M * C * 4;
  const STATE = OUT + M * region * 4;
  const SCRATCH = STATE + 2 * C * 4;
  const SCRATCH_BYTES = C * 4 + 64;
  // Two slots: tokens 0..10 continue slot 0's saved state, 11..28 start from slot 1's.
  const segmentStarts: [number, number][] = [[0, STATE], [11, STATE + C * 4]];

  function setUp(memory: WebAssembly.Memory) {
    const f = new Float32Array(memory.buffer);
    const rnd = seeded(3);
    for (let i = 0; i < T * C; i++) f[X / 4 + i] = (rnd() - 0.5) * 6 + (i % C === 5 ? 40 : 0);
    for (let i = 0; i < 2 * C; i++) f[LN / 4 + i] = rnd() + (i < C ? 0.5 : -0.5);
    for (let i = 0; i < M * C; i++) f[MIX / 4 + i] = rnd();
    for (let i = 0; i < 2 * C; i++) f[STATE / 4 + i] = rnd() - 0.5;
    const u = new Uint32Array(memory.buffer);
    u.fill(0, PREV / 4, PREV / 4 + T);
    for (const [t, at] of segmentStarts) u[PREV / 4 + t] = at;
    f.fill(NaN, XN / 4, XN / 4 + T * C);
    f.fill(NaN, OUT / 4, OUT / 4 + M * region);
  }

  function results(memory: WebAssembly.Memory): number[] {
    const f = new Float32Array(memory.buffer);
    const out: number[] = Array.from(f.subarray(XN / 4, XN / 4 + T * C));
    for (let m = 0; m < M; m++) out.push(...f.subarray(OUT / 4 + m * region, OUT / 4 + m * region + T * C));
    return out;
  }

  function whole(): number[] {
    const memory = new WebAssembly.Memory({ initial: 16, maximum: 16, shared: true });
    setUp(memory);
    instantiateKernels(memory).lnShift(X, T, C, LN, XN, PREV, MIX, M, OUT, region);
    return results(memory);
  }

  it('gives the bits of one pass over all tokens for any split, inside or at the start of a slot', () => {
    const want = whole();
    assert.ok(want.every(Number.isFinite));
    // Splits at 11 (a slot's first token), inside slot 0 (4) and inside slot 1 (12, 20), a share of one token.
    for (const cuts of [[11], [4, 12, 20], [1, 2, 28], [27]]) {
      const memory = new WebAssembly.Memory({ initial: 16, maximum: 16, shared: true });
      setUp(memory);
      const k = instantiateKernels(memory);
      const bounds = [0, ...cuts, T];
      // Later shares first: a share must not depend on what the share before it wrote.
      for (let i = bounds.length - 2; i >= 0; i--) k.lnShiftTokens(X, bounds[i], bounds[i + 1], C, LN, XN, PREV, MIX, M, OUT, region, SCRATCH + i * SCRATCH_BYTES);
      assert.deepEqual(results(memory), want, `cut at ${cuts.join(', ')}`);
    }
  });

  it('runs on the thread pool split over 2 threads with the same bits, and names too small a scratch', () => {
    const want = whole();
    const memory = new WebAssembly.Memory({ initial: 16, maximum: 16, shared: true });
    setUp(memory);
    const { module } = kernelModule();
    const pool = new ThreadPool(instantiateKernels(memory, module), memory, module, 2);
    try {
      pool.lnShift(X, T, C, LN, XN, PREV, MIX, M, OUT, region, SCRATCH, SCRATCH_BYTES);
      assert.deepEqual(results(memory), want);
      assert.throws(() => pool.lnShift(X, T, C, LN, XN, PREV, MIX, M, OUT, region, SCRATCH, C * 4 - 4), /lnShift needs 160 bytes of scratch per thread, got 156/);
    } finally {
      pool.dispose();
    }
  });
});
