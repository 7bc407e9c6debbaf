// Split-K products (engine/rwkv7/matmul.ts, shaders/mm_split.wgsl, mm_split_reduce.wgsl): on unless turned off,
// how many splits a product takes, and the engine's logits with them against without.

import * as assert from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { gpuBackends } from './gpu-backends';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { execFileSync } from 'child_process';
import * as path from 'path';
import { chooseMatmul, describeKernels, MAX_SPLIT, smallProductVecRowsFrom, splitKFromEnv, type MatmulConfig } from '../engine/rwkv7/matmul';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import { checkMatmulRows } from '../bench/matmul';

const H200: MatmulConfig = { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, vecMaxRows: 32, gemmTile: 64 };
const ROOM = 8 * 64 * 16384;

describe('split-K products', function () {
  this.timeout(300000);

  it('are on unless RWKV_MATMUL_SPLIT_K=0; off, the kernels are the single-pass ones measured before', () => {
    assert.strictEqual(splitKFromEnv({}), true);
    assert.strictEqual(splitKFromEnv({ RWKV_MATMUL_SPLIT_K: '0' }), false);
    assert.strictEqual(splitKFromEnv({ RWKV_MATMUL_SPLIT_K: '1' }), true);
    const shape = { k: 8192, virtualRows: 2048, scratchFloats: ROOM };
    assert.deepStrictEqual(chooseMatmul(64, H200, shape), { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 });
    assert.deepStrictEqual(chooseMatmul(512, { ...H200, kernelPath: 'f16' }, shape), { kind: 'gemm', tile: 64 });
    // `rwkv-flow info` says when it is on.
    assert.doesNotMatch(describeKernels(H200), /split/);
    assert.match(describeKernels({ ...H200, splitK: true }), /K split .*RWKV_MATMUL_SPLIT_K=0/);
  });

  it('small products stream up to 32 rows, or RWKV_MATMUL_SMALL_VEC_ROWS; other values are refused by name', () => {
    assert.strictEqual(smallProductVecRowsFrom(undefined), 32);
    assert.strictEqual(smallProductVecRowsFrom('64'), 64);
    assert.throws(() => smallProductVecRowsFrom('48'), /RWKV_MATMUL_SMALL_VEC_ROWS=48: give 16, 32, 64 or 128/);
    const kind = (v: string | undefined) =>
      execFileSync(process.execPath, ['-e', `const m = require(${JSON.stringify(path.join(__dirname, '../engine/rwkv7/matmul.js'))});
        const c = ${JSON.stringify({ ...H200, splitK: true, vecMaxRows: 4 })};
        const lora = { k: 2048, virtualRows: 288, scratchFloats: ${ROOM} };
        console.log([32, 64].map((rows) => m.chooseMatmul(rows, c, lora).kind).join(','))`],
      { env: { ...process.env, RWKV_MATMUL_SMALL_VEC_ROWS: v ?? '' }, encoding: 'utf8', stdio: 'pipe' }).trim();
    assert.strictEqual(kind(undefined), 'vec,sgmat');
    assert.strictEqual(kind('64'), 'vec,vec');
  });

  it('the 1.5B products split K towards 1024 workgroups and at most 1024 inputs a split (the H200 table)', () => {
    const on = { ...H200, splitK: true, vecMaxRows: 4 };
    const sgmat = { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 };
    const split = (rows: number, k: number, n: number, room = ROOM) => chooseMatmul(rows, on, { k, virtualRows: n, scratchFloats: room });
    // FFN value (2048 outputs, K = 8192): 8 splits at 16 and 64 tokens (43 and 129 µs against 280 and 350 unsplit) ...
    assert.deepStrictEqual(split(16, 8192, 2048), { ...sgmat, split: 8 });
    assert.deepStrictEqual(split(64, 8192, 2048), { ...sgmat, split: 8 });
    // ... and in a 512-token prefill chunk too: 1024 workgroups already, but K = 8192 is long (739 against 1,837 µs).
    assert.deepStrictEqual(split(512, 8192, 2048, 8 * 512 * 2048), { ...sgmat, split: 8 });
    // 2048² at 8 tokens (the streaming kernel stops at 4 rows here): 32 workgroups, 8 splits (13.4 against 17.1 µs).
    assert.deepStrictEqual(split(8, 2048, 2048), { ...sgmat, split: 8 });
    // FFN key (8192 outputs, K = 2048) at 512 tokens: 4096 workgroups, 2 splits for K (1,877 against 2,846 µs).
    assert.deepStrictEqual(split(512, 2048, 8192, 8 * 512 * 8192), { ...sgmat, split: 2 });
    // Never below 256 inputs a split, never more than fit the partial-sum room, never more than MAX_SPLIT.
    assert.strictEqual((split(64, 512, 64) as { split: number }).split, 2);
    assert.strictEqual((split(33, 8192, 2048, 2 * 33 * 2048) as { split: number }).split, 2);
    assert.ok((split(64, 1 << 20, 64, Infinity) as { split: number }).split <= MAX_SPLIT);
    // Small products (the 0.1B shape's 768 × 3072) stream up to 32 rows, as without the split.
    assert.deepStrictEqual(split(32, 768, 3072), { kind: 'vec', tb: 8 });
    assert.deepStrictEqual(split(33, 768, 3072).kind, 'sgmat');
    // The streaming kernel below its row limit; f32 tiles split only where K is long or workgroups are few.
    assert.deepStrictEqual(split(4, 8192, 2048), { kind: 'vec', tb: 4 });
    assert.deepStrictEqual(chooseMatmul(512, { ...on, kernelPath: 'f16' }, { k: 1024, virtualRows: 8192, scratchFloats: ROOM }), { kind: 'gemm', tile: 64, split: 1 });
  });

  it("bench section matmul fails loudly when a variant missed its check, naming case, variant and error", () => {
    const ok = { case: '2048x8192xT64', variant: 'sgmat1x1x4k64s8', relErr: 2e-4, bound: 2e-3, us: 50 };
    assert.doesNotThrow(() => checkMatmulRows([ok]));
    const bad = { case: '2048x8192xT64', variant: 'sgmat4x1x4k64s2', bound: 2e-3, error: 'relative error 0.5 against float64 exceeds 0.002' };
    assert.throws(() => checkMatmulRows([ok, bad]), /1 of 2 variant runs failed:\n {2}2048x8192xT64 sgmat4x1x4k64s2: relative error 0.5/);
  });

  describe('in the engine (f32 tiles on this device)', () => {
    const fixture = gpuBackends('all');

    it('a 40-token chunk gives the same logits with K split as without, and the FFN value product is split', async () => {
      const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, dtype: 'f32', seed: 21 });
      const tokens = Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % 300);
      const logits: Float32Array[] = [];
      for (const splitK of [false, true]) {
        // The runtime reads the switch when it is made (it sizes the partial-sum buffer then).
        const before = process.env.RWKV_MATMUL_SPLIT_K;
        process.env.RWKV_MATMUL_SPLIT_K = splitK ? '1' : '0';
        let be: Backend;
        try {
          be = fixture.open(await createBackend({ model: ck, slots: 1, precision: 'f32', gpu: fixture.gpu, device: 'gpu' }));
        } finally {
          if (before === undefined) delete process.env.RWKV_MATMUL_SPLIT_K;
          else process.env.RWKV_MATMUL_SPLIT_K = before;
        }
        const rt = be as unknown as Rwkv7Runtime;
        assert.strictEqual(rt.splitK, splitK);
        const labels = rt.dispatchLabels(40, 1, 40);
        assert.strictEqual(labels.includes('mm_gemms2:fv:reduce'), splitK, labels.join(', '));
        const [out] = await be.run([{ slot: 0, tokens, output: 'all' }]);
        logits.push(Float32Array.from(out as Float32Array));
      }
      let num = 0;
      let den = 0;
      for (let i = 0; i < logits[0].length; i++) {
        num += (logits[1][i] - logits[0][i]) ** 2;
        den += logits[0][i] ** 2;
      }
      assert.ok(Math.sqrt(num / den) < 1e-5, `relative L2 ${Math.sqrt(num / den)}`);
    });
  });
});
