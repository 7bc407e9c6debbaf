// Staged subgroup-matrix tiles (shaders/mm_sgstage.wgsl, engine/rwkv7/matmul.ts): when the engine chooses them,
// how RWKV_MATMUL_STAGED changes that, and how their shader is put together. Their arithmetic is checked on the
// H200 by bench section `matmul` (every variant against float64 before timing): lavapipe has no subgroup matrices.

import * as assert from 'assert';
import { shaderSource } from '../engine/gpu/shader-source';
import {
  chooseMatmul, DEFAULT_STAGED, describeKernels, matmulDispatch, matmulShader, stagedFromEnv, type MatmulConfig,
} from '../engine/rwkv7/matmul';

const H200: MatmulConfig = {
  kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, vecMaxRows: 4, gemmTile: 64, splitK: true, staged: DEFAULT_STAGED,
};
const ROOM = 8 * 512 * 16384;
const product = (rows: number, k: number, n: number, c: MatmulConfig = H200) => chooseMatmul(rows, c, { k, virtualRows: n, scratchFloats: ROOM });

describe('staged subgroup-matrix tiles', () => {
  it('RWKV_MATMUL_STAGED: unset the measured default, off none, a spec one variant for all products', () => {
    assert.deepStrictEqual(stagedFromEnv({}), DEFAULT_STAGED);
    assert.strictEqual(stagedFromEnv({ RWKV_MATMUL_STAGED: 'off' }), null);
    const one = stagedFromEnv({ RWKV_MATMUL_STAGED: '1x4x4x1k64@32' })!;
    assert.deepStrictEqual(one.large, { variant: { kind: 'sgstage', mt: 1, nt: 4, sgm: 4, sgn: 1, kc: 64 }, minRows: 32 });
    assert.deepStrictEqual(one.small, one.large);
    assert.throws(() => stagedFromEnv({ RWKV_MATMUL_STAGED: '2x2x2x2k48@64' }), /RWKV_MATMUL_STAGED: '2x2x2x2k48@64' is not 'off' or MTxNTxSGMxSGNkKC@ROWS/);
    assert.throws(() => stagedFromEnv({ RWKV_MATMUL_STAGED: '2x2x2x2k64' }), /is not 'off'/);
    // 4 tiles × 2 subgroups × 16 = 128 outputs: a workgroup would straddle two matrices of a group (64 apart).
    assert.throws(() => stagedFromEnv({ RWKV_MATMUL_STAGED: '1x4x1x2k64@64' }), /128 outputs a workgroup exceed 64/);
  });

  it('run the 1.5B products from 64 rows and the 0.1B ones from 128, with K split as for the other tiles', () => {
    const large = DEFAULT_STAGED.large.variant;
    const small = DEFAULT_STAGED.small.variant;
    // FFN key at 512 tokens: 128 × 8 workgroups, unsplit (594 µs; 650 in 2 splits); at 64 tokens 128 workgroups,
    // 2 splits towards 256.
    assert.deepStrictEqual(product(512, 2048, 8192), { ...large, split: 1 });
    assert.deepStrictEqual(matmulDispatch({ ...large, split: 1 }, 8192, 512), [128, 8, 1]);
    assert.deepStrictEqual(product(64, 2048, 8192), { ...large, split: 2 });
    // FFN value at 512 tokens (K = 8192): 4 splits of 2048 inputs (568 µs; 623 unsplit); 2048² at 128: 64
    // workgroups, 4 splits (50 µs; 82 unsplit).
    assert.deepStrictEqual(product(512, 8192, 2048), { ...large, split: 4 });
    assert.deepStrictEqual(product(128, 2048, 2048), { ...large, split: 4 });
    // Below 64 rows the split mm_sgmat tiles stay (they tie or win there).
    assert.strictEqual(product(63, 2048, 8192).kind, 'sgmat');
    // Small products: staged from 128 rows, split mm_sgmat below (768 × 3072 at 64 tokens: 21.9 against 27.6 µs).
    // ... unsplit where K is short (768² at 512 tokens: 30.8 µs; 36.9 in 2 splits).
    assert.deepStrictEqual(product(512, 768, 768), { ...small, split: 1 });
    assert.strictEqual(product(128, 768, 3072).kind, 'sgstage');
    assert.strictEqual(product(64, 768, 3072).kind, 'sgmat');
    // A large product with a short K counts as small: the 0.1B head (65,536 × 768) at batch 64 stays on split
    // mm_sgmat, and takes the small staged tiles in a prefill chunk.
    assert.strictEqual(product(64, 768, 65536).kind, 'sgmat');
    assert.deepStrictEqual(product(512, 768, 65536), { ...small, split: 1 });
    // Not without split K, not on other paths or precisions, not when turned off.
    assert.strictEqual(product(512, 2048, 8192, { ...H200, splitK: false }).kind, 'gemm');
    assert.strictEqual(product(512, 2048, 8192, { ...H200, kernelPath: 'f16' }).kind, 'gemm');
    assert.strictEqual(product(512, 2048, 8192, { ...H200, precision: 'nf4' }).kind, 'gemm');
    assert.strictEqual(product(512, 2048, 8192, { ...H200, staged: null }).kind, 'sgmat');
    assert.match(describeKernels(H200), /more rows on subgroup matrices \(f16×f16→f32, 16×16×16\), from 64 rows \(128 for small matrices or K < 2048\) on tiles staged in workgroup memory/);
    // Without split K the first subgroup-matrix kernel's range is what runs.
    assert.match(describeKernels({ ...H200, splitK: false }), /up to 128 rows, f32 multiply-adds in 64-token tiles above$/);
    assert.doesNotMatch(describeKernels({ ...H200, staged: null }), /staged/);
  });

  it('run int8 codes on every row count above the streaming kernel (no other matrix-unit kernel reads them)', () => {
    const int8 = { ...H200, precision: 'int8' as const };
    const large = DEFAULT_STAGED.large.variant;
    const small = DEFAULT_STAGED.small.variant;
    assert.deepStrictEqual(product(4, 2048, 8192, int8), { kind: 'vec', tb: 4 });
    // The small products' tiles for every int8 product (they won nearly every int8 shape).
    assert.deepStrictEqual(product(32, 2048, 8192, int8), { ...small, split: 2 });
    assert.deepStrictEqual(product(512, 2048, 8192, int8), { ...small, split: 1 });
    assert.strictEqual(product(32, 768, 3072, int8).kind, 'sgstage');
    // Without the tiles (RWKV_MATMUL_STAGED=off) or split K, int8 keeps the f32 tiles.
    assert.strictEqual(product(512, 2048, 8192, { ...int8, staged: null }).kind, 'gemm');
    assert.strictEqual(product(512, 2048, 8192, { ...int8, splitK: false }).kind, 'gemm');
    assert.match(describeKernels(int8), /int8 codes widened to f16 on subgroup matrices/);
    const s = matmulShader({ ...small, split: 1 }, { kernelPath: 'subgroup-matrix', precision: 'int8', subgroup32: true });
    assert.deepStrictEqual(s.parts, ['weights_i8_staged', 'mm_common', 'wlayout_rows', 'mm_whole', 'mm_sgstage']);
    assert.strictEqual(s.key, 'mm_sgstage1x2x4x2k32:weights_i8_staged');
    assert.throws(() => matmulShader({ ...large, split: 1 }, { kernelPath: 'subgroup-matrix', precision: 'nf4', subgroup32: true }), /needs f16 or int8 weights/);
  });

  it('shader: the staged weight prelude, every constant filled in, refused where it cannot run', () => {
    const c = { kernelPath: 'subgroup-matrix' as const, precision: 'f16' as const, subgroup32: true };
    const v = { kind: 'sgstage' as const, mt: 2 as const, nt: 2 as const, sgm: 2 as const, sgn: 2 as const, kc: 64 as const, split: 2 };
    const s = matmulShader(v, c);
    assert.strictEqual(s.key, 'mm_sgstage2x2x2x2k64s2:weights_f16_staged');
    assert.deepStrictEqual(s.parts, ['weights_f16_staged', 'mm_common', 'wlayout_rows', 'split_layout', 'mm_split', 'mm_sgstage']);
    assert.strictEqual(s.bindings.length, 6); // the partial sums of the split
    const src = shaderSource(s.parts, s.constants);
    assert.doesNotMatch(src, /\{\{/);
    assert.match(src, /const KC: u32 = 64u;/);
    assert.match(src, /const SPLIT: u32 = 2u;/);
    assert.strictEqual(src.match(/@binding\(1\)/g)?.length, 1);
    assert.throws(() => matmulShader(v, { ...c, kernelPath: 'f16' }), /needs f16 or int8 weights on a subgroup-matrix device/);
    assert.throws(() => matmulShader({ ...v, nt: 4, sgn: 2 }, c), /128 outputs would straddle segments/);
  });
});
