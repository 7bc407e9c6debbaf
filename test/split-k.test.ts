// Split-K products (engine/rwkv7/matmul.ts, shaders/mm_split.wgsl, mm_split_reduce.wgsl): off unless asked for,
// how many splits a product takes, and the engine's logits with them against without.

import * as assert from 'assert';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { chooseMatmul, MAX_SPLIT, splitKFromEnv, type MatmulConfig } from '../engine/rwkv7/matmul';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';

const H200: MatmulConfig = { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, vecMaxRows: 32, gemmTile: 64 };
const ROOM = 8 * 64 * 16384;

describe('split-K products', function () {
  this.timeout(300000);

  it('are off unless RWKV_MATMUL_SPLIT_K=1: without the switch the kernels are the ones measured before', () => {
    assert.strictEqual(splitKFromEnv({}), false);
    assert.strictEqual(splitKFromEnv({ RWKV_MATMUL_SPLIT_K: '0' }), false);
    assert.strictEqual(splitKFromEnv({ RWKV_MATMUL_SPLIT_K: '1' }), true);
    const shape = { k: 8192, virtualRows: 2048, scratchFloats: ROOM };
    assert.deepStrictEqual(chooseMatmul(64, H200, shape), { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 });
    assert.deepStrictEqual(chooseMatmul(512, { ...H200, kernelPath: 'f16' }, shape), { kind: 'gemm', tile: 64 });
  });

  it('switched on, the 1.5B batched-decode products take 64-token tiles and split K towards 264 workgroups', () => {
    const on = { ...H200, splitK: true };
    // FFN value (2048 outputs, K = 8192) at 64 tokens: 32 workgroups unsplit, so 8 splits of 1024 inputs.
    assert.deepStrictEqual(chooseMatmul(64, on, { k: 8192, virtualRows: 2048, scratchFloats: ROOM }), { kind: 'sgmat', mt: 4, nt: 1, sgs: 4, kc: 64, split: 8 });
    // FFN key (8192 outputs, K = 2048): 128 workgroups, 4 splits of 512.
    assert.deepStrictEqual(chooseMatmul(64, on, { k: 2048, virtualRows: 8192, scratchFloats: ROOM }), { kind: 'sgmat', mt: 4, nt: 1, sgs: 4, kc: 64, split: 4 });
    // 32 tokens a workgroup from 17 to 32 tokens: 2048² at 20 tokens, 32 workgroups, 8 splits.
    assert.deepStrictEqual(chooseMatmul(20, { ...on, vecMaxRows: 16 }, { k: 2048, virtualRows: 2048, scratchFloats: ROOM }), { kind: 'sgmat', mt: 2, nt: 1, sgs: 4, kc: 64, split: 8 });
    // Never below 256 inputs a split, never more than fit the partial-sum room, never more than MAX_SPLIT.
    assert.strictEqual((chooseMatmul(64, on, { k: 512, virtualRows: 64, scratchFloats: ROOM }) as { split: number }).split, 2);
    assert.strictEqual((chooseMatmul(64, on, { k: 8192, virtualRows: 2048, scratchFloats: 2 * 64 * 2048 }) as { split: number }).split, 2);
    assert.ok((chooseMatmul(64, on, { k: 1 << 20, virtualRows: 64, scratchFloats: Infinity }) as { split: number }).split <= MAX_SPLIT);
    // Streaming decode and prefill chunks with enough workgroups are left alone.
    assert.deepStrictEqual(chooseMatmul(8, on, { k: 8192, virtualRows: 2048, scratchFloats: ROOM }), { kind: 'vec', tb: 8 });
    assert.deepStrictEqual(chooseMatmul(512, { ...on, kernelPath: 'f16' }, { k: 2048, virtualRows: 8192, scratchFloats: ROOM }), { kind: 'gemm', tile: 64, split: 1 });
  });

  describe('in the engine (f32 tiles on this device)', () => {
    let gpu: GpuContext;
    const open: Backend[] = [];
    before(async () => {
      gpu = await acquireGpu();
    });
    after(() => {
      for (const be of open) be.dispose();
    });

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
          be = await createBackend({ model: ck, slots: 1, precision: 'f32', gpu, device: 'gpu' });
        } finally {
          if (before === undefined) delete process.env.RWKV_MATMUL_SPLIT_K;
          else process.env.RWKV_MATMUL_SPLIT_K = before;
        }
        open.push(be);
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
