// Tiled subgroup-matrix products (shaders/mm_sgtile.wgsl after mm_sgtile_x.wgsl, engine/rwkv7/matmul.ts): when the
// engine chooses them, how RWKV_MATMUL_TILED changes that, the room the runtime holds for their inputs, and — on
// this device — the input-tiling pass itself, against the block layout computed here. The product's arithmetic
// runs on subgroup matrices: test/subgroup-matrix-emulated.test.ts checks it here with the matrices emulated, and
// bench section `matmul` and bench/golden-check.ts on the H200.

import * as assert from 'assert';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { bindGroup, createBuffer, makeKernel } from '../engine/gpu/kernel';
import { f16BitsToF32, f32ToF16 } from '../engine/loader/dtype';
import { shaderSource } from '../engine/gpu/shader-source';
import {
  chooseMatmul, chooseSplit, tiledSlicesOf, DEFAULT_STAGED, MAX_TILED_SPLIT, tiledSplitTargetFrom, DEFAULT_TILED, describeKernels, tiledFor, splitSgmatMtFrom, groupUniform, matmulShader, reducesAfter, splitReduceDispatch,
  splitReduceShader, splitScratchFloats, tiledFromEnv, tiledInputHalves, tileInputDispatch, tileInputShader, TILE_TOKENS, tileTokensOf, type MatmulConfig,
} from '../engine/rwkv7/matmul';
import { matrixGroupsOf, tileableGroup, tiledInputCapacity } from '../engine/rwkv7/tiled-inputs';
import { DEFAULT_TILED_KU, tiledUnrollFrom } from '../engine/rwkv7/tiled-unroll';
import { tiledPipeFrom } from '../engine/rwkv7/tiled-pipeline';
import { tiledSlicesFrom } from '../engine/rwkv7/tiled-slices';
import { stagedRowsCode, tiledProductCode } from '../engine/rwkv7/sgtile-code';
import type { MatrixGroup, ModelWeights } from '../engine/rwkv7/weights';
import { readBuffer, values } from './grouped-product';

const H200: MatmulConfig = {
  kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, vecMaxRows: 4, gemmTile: 64, splitK: true, staged: DEFAULT_STAGED, tiled: DEFAULT_TILED,
};
const ROOM = 8 * 512 * 16384;
const product = (rows: number, k: number, n: number, tileable = true, c: MatmulConfig = H200) =>
  chooseMatmul(rows, c, { k, virtualRows: n, scratchFloats: ROOM, tileable });

describe('tiled subgroup-matrix products: choice and shader', () => {
  it('RWKV_MATMUL_TILED: unset the measured default, off none, a spec one tiling; bad specs named', () => {
    assert.deepStrictEqual(tiledFromEnv({}), DEFAULT_TILED);
    assert.strictEqual(tiledFromEnv({ RWKV_MATMUL_TILED: 'off' }), null);
    const one = { kind: 'sgtile', mt: 1, nt: 2, sgm: 4, sgn: 2 };
    assert.deepStrictEqual(tiledFromEnv({ RWKV_MATMUL_TILED: '1x2x4x2@128' }), { large: one, medium: one, base: one, minRows: 128, largeRows: 128 });
    const unrolled = tiledFromEnv({ RWKV_MATMUL_TILED: '2x2x2x2u4@64' })!;
    assert.deepStrictEqual(unrolled.large, { kind: 'sgtile', mt: 2, nt: 2, sgm: 2, sgn: 2, ku: 4 });
    assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED: '2x2x2x2' }), /RWKV_MATMUL_TILED: '2x2x2x2' is not 'off' or MTxNTxSGMxSGN\[uKU\]\[p\]\[qSK\]@ROWS/);
    assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED: '2x2x2x2u3@64' }), /is not 'off' or MTxNTxSGMxSGN/);
    // The large or medium tiles alone replaced (A/B runs of the prefill products); the rest stays the default.
    const large = tiledFromEnv({ RWKV_MATMUL_TILED_LARGE: '4x2x1x2u4p' })!;
    assert.deepStrictEqual(large, { ...DEFAULT_TILED, large: { kind: 'sgtile', mt: 4, nt: 2, sgm: 1, sgn: 2, ku: 4, pipe: true } });
    assert.deepStrictEqual(tiledFromEnv({ RWKV_MATMUL_TILED_MEDIUM: '2x2x2x2' })!.medium, { kind: 'sgtile', mt: 2, nt: 2, sgm: 2, sgn: 2 });
    assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED_LARGE: '4x2x1x2@64' }), /RWKV_MATMUL_TILED_LARGE: '4x2x1x2@64' is not MTxNTxSGMxSGN/);
    assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED: '4x4x1x4@64' }), /256 outputs a workgroup exceed 128/);
    assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED: '4x2x4x2@64' }), /256 tokens a workgroup exceed 128/);
    // From how many output tiles the large tiles start (A/B runs); anything but a whole number is refused by name.
    const from512 = tiledFromEnv({ RWKV_MATMUL_TILED_LARGE_TILES: '512' })!;
    assert.deepStrictEqual(from512, { ...DEFAULT_TILED, largeTiles: 512 });
    assert.deepStrictEqual(chooseMatmul(512, { ...H200, tiled: from512 }, { k: 2048, virtualRows: 6144, scratchFloats: ROOM, tileable: true }).kind, 'sgtile');
    assert.deepStrictEqual(tiledFor(from512, { k: 2048, virtualRows: 6144 }, 512), DEFAULT_TILED.large);
    assert.deepStrictEqual(tiledFor(DEFAULT_TILED, { k: 2048, virtualRows: 6144 }, 512), DEFAULT_TILED.base);
    for (const bad of ['0', '-5', '1e3', 'many']) assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED_LARGE_TILES: bad }), /RWKV_MATMUL_TILED_LARGE_TILES: /);
    // Up to 128 × 128 (matmul.ts WIDE_TILE): 4×4 tiles in 2×2 subgroups.
    assert.deepStrictEqual(tiledFromEnv({ RWKV_MATMUL_TILED: '4x4x2x2u4@256' })!.large, { kind: 'sgtile', mt: 4, nt: 4, sgm: 2, sgn: 2, ku: 4 });
  });

  it('take every f16 product from 64 rows, tiles and splits as measured on the H200; fewer rows keep split mm_sgmat', () => {
    const { large, medium, base } = DEFAULT_TILED;
    // Batched decode (64 rows): 2×2 tiles in 2×2 subgroups, split towards 4,096 subgroups (1,024 workgroups), at least
    // 256 inputs a split. 2048² (32 workgroups unsplit): 8 splits; the FFN value (K 8192) 32; the FFN key (8192
    // outputs, 128 workgroups) 8.
    assert.deepStrictEqual(product(64, 2048, 2048), { ...base, split: 8 });
    assert.deepStrictEqual(product(64, 8192, 2048), { ...base, split: 32 });
    assert.deepStrictEqual(product(64, 2048, 8192), { ...base, split: 8 });
    // 512 tokens: the FFN key has 1,024 tiles: the large tiles (4×2 in two subgroups) unsplit; the FFN value's K of
    // 8192 takes them too, in 2 splits; 2048² (256 tiles) takes the medium tiles (the same) in 2 splits; the r/k/v
    // group (768 tiles) the base tiles unsplit.
    assert.deepStrictEqual(large, { kind: 'sgtile', mt: 4, nt: 2, sgm: 1, sgn: 2, ku: 4 });
    assert.deepStrictEqual(product(512, 2048, 8192), { ...large, split: 1 });
    assert.deepStrictEqual(product(512, 8192, 2048), { ...large, split: 2 });
    assert.deepStrictEqual(product(512, 2048, 2048), { ...medium, split: 2 });
    assert.deepStrictEqual(product(512, 2048, 6144), { ...base, split: 1 });
    // LoRA products: up-projections (K = rank 64, 4 × 2048 outputs) and down-projections (K 2048, 256 outputs).
    assert.strictEqual(tiledFor(DEFAULT_TILED, { k: 64, virtualRows: 8192 }, 512), base);
    assert.strictEqual(tiledFor(DEFAULT_TILED, { k: 2048, virtualRows: 256 }, 512), base);
    // The 0.4B FFN value (K 4096, 1024 outputs) at 512: 128 tiles, the base ones.
    assert.strictEqual(tiledFor(DEFAULT_TILED, { k: 4096, virtualRows: 1024 }, 512), base);
    // Below 256 rows the base tiles run whatever the shape.
    assert.strictEqual(tiledFor(DEFAULT_TILED, { k: 8192, virtualRows: 8192 }, 255), base);
    // The 0.1B FFN value at 64 tokens: 12 workgroups, 8 splits of 384 inputs.
    assert.deepStrictEqual(product(64, 3072, 768), { ...base, split: 8 });
    assert.strictEqual(product(63, 2048, 2048).kind, 'sgmat');
  });

  it('generates the product as straight-line code: one variable per matrix, a trip of KU steps loaded before it multiplies', () => {
    const code = tiledProductCode(4, 2, 4, 2);
    assert.strictEqual(code.ACCUMULATORS.match(/var c_\d_\d: subgroup_matrix_result<f32, 16, 16>;/g)!.length, 8);
    // K_LOOP: the loop of trips, then the loop of single steps.
    const lines = code.K_LOOP.split('\n').map((l) => l.trim());
    const tripStart = lines.indexOf('for (; k0 + 48u < span.y; k0 += 64u) {');
    const stepStart = lines.indexOf('for (; k0 < span.y; k0 += 16u) {');
    assert.ok(tripStart > 0 && stepStart > tripStart, code.K_LOOP);
    const trip = lines.slice(tripStart + 1, stepStart - 1);
    const step = lines.slice(stepStart + 1, -1).join('\n');
    // 4 steps × (4 left + 2 right) loads, then 4 × 8 multiplies, every load before the first multiply.
    assert.strictEqual(trip.filter((l) => l.includes('subgroupMatrixLoad')).length, 24);
    assert.strictEqual(trip.filter((l) => l.includes('subgroupMatrixMultiplyAccumulate')).length, 32);
    const lastLoad = trip.length - 1 - [...trip].reverse().findIndex((l) => l.includes('Load'));
    assert.ok(trip.findIndex((l) => l.includes('Multiply')) > lastLoad);
    assert.match(trip.join('\n'), /let a3_2 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>\(&xt, xbase \+ 512u \* kblocks \+ \(k0 \/ 16u \+ 3u\) \* 256u, 16u\);/);
    assert.match(trip.join('\n'), /let b3_1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>\(&W, wbase \+ 1u \* wstrip \+ w_tile_k\(s, k0 \+ 48u\), wstride\);/);
    assert.match(step, /c_3_1 = subgroupMatrixMultiplyAccumulate\(a0_3, b0_1, c_3_1\);/);
    assert.match(code.STORES, /subgroupMatrixStore<row_major>\(&part, part0 \+ 48u \* pstride \+ 16u, c_3_1, pstride\);/);
    assert.strictEqual(code.SHARED, '');
    // Unsplit: every tile through the subgroup's workgroup memory into store(), as the reduction pass would store it.
    const own = tiledProductCode(4, 2, 4, 1);
    assert.doesNotMatch(own.STORES, /&part/);
    assert.strictEqual(own.STORES.match(/subgroupMatrixStore<row_major>\(&ot, sg \* 256u, c_\d_\d, 16u\);/g)!.length, 8);
    assert.strictEqual(own.STORES.match(/store\(s, t, o, ot\[sg \* 256u \+ e\]\)/g)!.length, 8);
    assert.match(own.STORES, /let t = tr0 \+ 48u \+ e \/ 16u;\n\s*let o = or0 \+ 16u \+ e % 16u;/);
    assert.strictEqual(own.SHARED, 'var<workgroup> ot: array<f32, 256u * SGS * SK>;');
    const unsplit = shaderSource(matmulShader({ ...DEFAULT_TILED.large, split: 1 }, H200).parts, matmulShader({ ...DEFAULT_TILED.large, split: 1 }, H200).constants);
    assert.match(unsplit, /var<workgroup> ot: array<f32, 256u \* SGS \* SK>;/);
    assert.doesNotMatch(unsplit, /subgroupMatrixStore<row_major>\(&part/);
    // No arrays of matrices and no {{placeholders}} left in the assembled shader.
    const s = matmulShader({ ...DEFAULT_TILED.large, split: 2 }, H200);
    const src = shaderSource(s.parts, s.constants);
    assert.doesNotMatch(src, /array<subgroup_matrix/);
    assert.doesNotMatch(src, /\{\{/);
    assert.match(src, /const KU: u32 = 4u;/);
    assert.match(s.key, /^mm_sgtile4x2x1x2s2k4/);
  });

  it('pipelined trips: the next trip loaded into fresh matrices before this trip multiplies, then moved in', () => {
    const code = tiledProductCode(4, 2, 4, 1, true, true);
    const lines = code.K_LOOP.split('\n').map((l) => l.trim());
    // The prologue loads the first trip (4 steps × 6 matrices) at the span's start into vars.
    const prologue = lines.slice(0, lines.indexOf('var k0 = span.x;'));
    assert.strictEqual(prologue.length, 24);
    assert.ok(prologue.every((l) => l.startsWith('var ') && l.includes('span.x')), prologue.join('\n'));
    const tripStart = lines.indexOf('for (; k0 + 48u < span.y; k0 += 64u) {');
    const stepStart = lines.indexOf('for (; k0 < span.y; k0 += 16u) {');
    const trip = lines.slice(tripStart + 1, stepStart - 1);
    assert.strictEqual(trip[0], 'let kn = k0 + 64u;');
    const loads = trip.filter((l) => l.includes('subgroupMatrixLoad'));
    assert.strictEqual(loads.length, 24);
    assert.ok(loads.every((l) => /^let n[ab]\d_\d = /.test(l) && l.includes('kn')), loads.join('\n'));
    // Every load of the next trip before the first multiply, every multiply on the current matrices, then the moves.
    const lastIndex = (f: (l: string) => boolean) => trip.length - 1 - [...trip].reverse().findIndex(f);
    assert.ok(trip.findIndex((l) => l.includes('Multiply')) > lastIndex((l) => l.includes('Load')));
    assert.strictEqual(trip.filter((l) => /subgroupMatrixMultiplyAccumulate\(a\d_\d, b\d_\d, c_\d_\d\)/.test(l)).length, 32);
    const moves = trip.filter((l) => /^[ab]\d_\d = n[ab]\d_\d;$/.test(l));
    assert.strictEqual(moves.length, 24);
    assert.ok(trip.findIndex((l) => moves.includes(l)) > lastIndex((l) => l.includes('Multiply')));
    // The single steps after the trips load their own matrices.
    assert.match(lines.slice(stepStart).join('\n'), /let a0_3 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>\(&xt, xbase \+ 768u \* kblocks \+ \(k0 \/ 16u \+ 0u\) \* 256u, 16u\);/);
    // Asked for by the tiling spec's 'p', named in the kernel's key, assembled without placeholders.
    const choice = tiledFromEnv({ RWKV_MATMUL_TILED: '4x4x1x1u4p@1' })!;
    assert.strictEqual(choice.large.pipe, true);
    const sh = matmulShader({ ...choice.large, split: 2 }, H200);
    assert.match(sh.key, /^mm_sgtile4x4x1x1s2k4p/);
    const src = shaderSource(sh.parts, sh.constants);
    assert.doesNotMatch(src, /\{\{/);
    assert.match(src, /let nb3_3 = /);
    assert.strictEqual(tiledFromEnv({ RWKV_MATMUL_TILED: '4x4x1x1u4@1' })!.large.pipe, undefined);
    assert.throws(() => tiledPipeFrom('yes'), /RWKV_MATMUL_TILED_PIPE=yes: give on or off/);
    assert.strictEqual(tiledPipeFrom(undefined), false);
    assert.strictEqual(tiledPipeFrom('on'), true);
  });

  it('split mm_sgmat: every weight matrix of a stage loaded before its activations are staged, multiplies in the loop order', () => {
    const code = stagedRowsCode(2, 2, 64);
    const wl = code.WLOADS.split('\n').map((l) => l.trim());
    // 4 steps of 16 × 2 output tiles, clamped to the span so a half-full stage reads nothing past it.
    assert.strictEqual(wl.length, 8);
    assert.match(code.WLOADS, /let w3_1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>\(&W, w_tile_at\(s, o0 \+ 16u, min\(k0 \+ 48u, span\.y - 16u\)\), wstride\);/);
    // Each step guarded by the span (a last stage may be half full); per step the multiplies go j-major, i-minor.
    const m = code.MULTIPLIES.split('\n').map((l) => l.trim());
    assert.strictEqual(m.filter((l) => l.startsWith('if (k0 + ')).length, 4);
    const mmas = m.filter((l) => l.includes('Multiply')).slice(0, 4);
    assert.deepStrictEqual(mmas, [
      'c_0_0 = subgroupMatrixMultiplyAccumulate(a0_0, w0_0, c_0_0);',
      'c_1_0 = subgroupMatrixMultiplyAccumulate(a0_1, w0_0, c_1_0);',
      'c_0_1 = subgroupMatrixMultiplyAccumulate(a0_0, w0_1, c_0_1);',
      'c_1_1 = subgroupMatrixMultiplyAccumulate(a0_1, w0_1, c_1_1);',
    ]);
    assert.strictEqual((code.EPILOGUE.match(/emit\(s, t, o, ot\[sg \* 256u \+ e\], wid\.z\)/g) ?? []).length, 4);
    const s = matmulShader({ kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64, split: 8 }, { ...H200, layout: 'blocks' });
    const src = shaderSource(s.parts, s.constants);
    assert.doesNotMatch(src, /array<subgroup_matrix/);
    assert.doesNotMatch(src, /\{\{/);
    // The weights' loads come before the staging loop and its barrier.
    assert.ok(src.indexOf('let w0_0 = subgroupMatrixLoad') < src.indexOf('for (var e = lid; e < BM * KC / 4u;'));
  });

  it('RWKV_MATMUL_TILED_SUBGROUPS: tiled products split towards more subgroups, up to 32 splits; bad values named', () => {
    // Unset: 4,096 subgroups below 256 rows (batched decode, short chunks), 1,024 from there.
    const byRows = tiledSplitTargetFrom(undefined);
    assert.deepStrictEqual([byRows(64), byRows(255), byRows(256)], [4096, 4096, 1024]);
    assert.deepStrictEqual([tiledSplitTargetFrom('2048')(64), tiledSplitTargetFrom('2048')(512)], [2048, 2048]);
    assert.throws(() => tiledSplitTargetFrom('3000'), /RWKV_MATMUL_TILED_SUBGROUPS=3000: give 512, 1024, 2048, 4096 or 8192/);
    const base = { ...DEFAULT_TILED.base, split: 1 };
    const split = (k: number, n: number, rows: number, target = byRows) => chooseSplit(base, { k, virtualRows: n, scratchFloats: ROOM, tileable: true }, rows, target);
    // At 64 rows: the FFN value (K 8192, 32 tiles of 4 subgroups) 32 splits of 256 inputs, the FFN key (128 tiles) 8;
    // never below 256 inputs a split, whatever the target.
    assert.strictEqual(split(8192, 2048, 64), 32);
    assert.strictEqual(MAX_TILED_SPLIT, 32);
    assert.strictEqual(split(2048, 8192, 64), 8);
    assert.strictEqual(split(2048, 8192, 64, tiledSplitTargetFrom('8192')), 8);
    // 1,024 subgroups (the target before the sixteenth session): 8 and 2.
    assert.strictEqual(split(8192, 2048, 64, tiledSplitTargetFrom('1024')), 8);
    assert.strictEqual(split(2048, 8192, 64, tiledSplitTargetFrom('1024')), 2);
    // 128-token chunks take the few-rows target too; 512 the 1,024 one (the FFN value in 2 splits for 256 tiles).
    assert.strictEqual(split(8192, 2048, 128), 16);
    assert.strictEqual(split(8192, 2048, 512), 2);
    // A 32-split product's shader is valid; 64 splits are refused.
    assert.match(matmulShader({ ...DEFAULT_TILED.base, split: 32 }, H200).key, /s32/);
    assert.throws(() => matmulShader({ ...DEFAULT_TILED.base, split: 64 }, H200), /K split 64 is outside 1..32/);
  });

  it('K slices a workgroup: the slices\' tiles summed in slice order by slice 0, splits chosen for the same subgroups', () => {
    // Unsplit: each tile through workgroup memory, slice 0's subgroups adding slices 1..3 in order, then store().
    const own = tiledProductCode(4, 2, 4, 1, false, false, 4);
    assert.strictEqual(own.SHARED, 'var<workgroup> ot: array<f32, 256u * SGS * SK>;');
    assert.strictEqual(own.STORES.match(/if \(q == 0u\) \{/g)!.length, 8);
    assert.match(own.STORES, /store\(s, t, o, ot\[sg \* 256u \+ e\] \+ ot\[\(sg \+ 1u \* SGS\) \* 256u \+ e\] \+ ot\[\(sg \+ 2u \* SGS\) \* 256u \+ e\] \+ ot\[\(sg \+ 3u \* SGS\) \* 256u \+ e\]\);/);
    // Split: the sums go to the partial sums element by element where the matrix store would put them.
    const split = tiledProductCode(4, 2, 4, 8, false, false, 2);
    assert.doesNotMatch(split.STORES, /subgroupMatrixStore<row_major>\(&part/);
    assert.match(split.STORES, /part\[part0 \+ \(48u \+ e \/ 16u\) \* pstride \+ 16u \+ e % 16u\] = ot\[sg \* 256u \+ e\] \+ ot\[\(sg \+ 1u \* SGS\) \* 256u \+ e\];/);
    // One slice: the code of before (no slice test, the matrix stores into the partial sums).
    assert.doesNotMatch(tiledProductCode(4, 2, 4, 1).STORES, /q == 0u/);
    assert.match(tiledProductCode(4, 2, 4, 8).STORES, /subgroupMatrixStore<row_major>\(&part/);
    // The spec's qSK; a workgroup past 256 invocations refused; the key and constant name it.
    const choice = tiledFromEnv({ RWKV_MATMUL_TILED: '2x2x2x2u2q2@64' })!;
    assert.strictEqual(choice.base.sk, 2);
    assert.throws(() => tiledFromEnv({ RWKV_MATMUL_TILED: '2x2x2x2q4@64' }), /16 subgroups a workgroup exceed 8/);
    const sh = matmulShader({ ...choice.base, split: 4 }, H200);
    assert.match(sh.key, /^mm_sgtile2x2x2x2s4k2q2/);
    const src = shaderSource(sh.parts, sh.constants);
    assert.match(src, /const SK: u32 = 2u;/);
    assert.match(src, /let span = k_slice\(k, wid\.z \* SK \+ q, SPLIT \* SK, 16u\);/);
    assert.doesNotMatch(src, /\{\{/);
    // Splits for the same subgroups: the 1.5B FFN value at 64 rows, 32 splits in 4 subgroups, 16 with 2 slices.
    const chosen = (v: typeof choice.base) => chooseSplit(v, { k: 8192, virtualRows: 2048, scratchFloats: ROOM, tileable: true }, 64, tiledSplitTargetFrom(undefined));
    assert.strictEqual(chosen({ ...DEFAULT_TILED.base }), 32);
    assert.strictEqual(chosen({ ...DEFAULT_TILED.base, sk: 2 }), 16);
    assert.strictEqual(tiledSlicesOf({ sgm: 2, sgn: 2, sk: 4 }), 2);
    assert.strictEqual(tiledSlicesOf({ sgm: 1, sgn: 1, sk: 4 }), 4);
    assert.strictEqual(tiledSlicesFrom(undefined), 1);
    assert.throws(() => tiledSlicesFrom('3'), /RWKV_MATMUL_TILED_SK=3: give 1, 2 or 4/);
  });

  it('RWKV_MATMUL_SGMAT_MT: token tiles a split mm_sgmat subgroup holds, 1 unless set; other values refused', () => {
    assert.strictEqual(splitSgmatMtFrom(undefined), 1);
    assert.strictEqual(splitSgmatMtFrom('4'), 4);
    assert.throws(() => splitSgmatMtFrom('3'), /RWKV_MATMUL_SGMAT_MT=3: give 1, 2 or 4/);
  });

  it('always write whole tiles of partial sums, so they run only where those fit the scratch', () => {
    const t = { ...DEFAULT_TILED.large, split: 2 };
    // 65 tokens → 128 padded rows; 100 virtual rows → 128 (whole segments of 64).
    assert.strictEqual(splitScratchFloats(t, 100, 65), 2 * 128 * 128);
    assert.strictEqual(splitScratchFloats({ ...t, split: 1 }, 100, 65), 128 * 128);
    // Unsplit, the tiled product stores its own results (no reduction pass); split, the reduction adds the parts.
    assert.strictEqual(reducesAfter({ ...t, split: 1 }), false);
    assert.strictEqual(reducesAfter(t), true);
    assert.strictEqual(reducesAfter({ ...DEFAULT_STAGED.large.variant, split: 1 }), false);
    // Room for one unsplit tile set of 512 × 8192 but not two: unsplit; less than one: the staged tiles.
    assert.deepStrictEqual(chooseMatmul(512, H200, { k: 8192, virtualRows: 8192, scratchFloats: 512 * 8192, tileable: true }), { ...DEFAULT_TILED.large, split: 1 });
    assert.strictEqual(chooseMatmul(512, H200, { k: 2048, virtualRows: 8192, scratchFloats: 512 * 8192 - 1, tileable: true }).kind, 'sgstage');
    const r = splitReduceShader({ ...t, split: 1 }, H200, 64);
    assert.deepStrictEqual(r.parts, ['weights_f16_matrix', 'mm_common', 'sgtile_layout', 'mm_split', 'reduce_store_rows', 'mm_split_reduce']);
    assert.strictEqual(r.bindings.length, 7);
    // Storing the next product's f16 blocks instead: binding 7, and the padded rows covered (65 tokens → 128).
    const b = splitReduceShader({ ...t, blocksOut: true }, H200, 65);
    assert.deepStrictEqual(b.parts, ['weights_f16_matrix', 'mm_common', 'sgtile_layout', 'mm_split', 'block_layout', 'sgtile_blocks_out', 'reduce_store_blocks', 'mm_split_reduce']);
    assert.deepStrictEqual([b.bindings.length, b.bindings[7]], [8, 'rw']);
    assert.match(b.key, /:blocks$/);
    assert.deepStrictEqual(splitReduceDispatch(100, 65, 64), [2, 128]);
    assert.deepStrictEqual(splitReduceDispatch(100, 65), [2, 65]);
    // A split product storing blocks leaves them to its reduction pass: the product itself is the plain split one.
    assert.deepStrictEqual(matmulShader({ ...t, blocksOut: true }, H200), matmulShader(t, H200));
    assert.match(matmulShader({ ...t, split: 1, blocksOut: true }, H200).key, /b$/);
  });

  it('groups that cannot be tiled, int8 groups and RWKV_MATMUL_TILED=off keep the staged tiles', () => {
    assert.strictEqual(product(512, 2048, 2048, false).kind, 'sgstage');
    assert.strictEqual(product(512, 2048, 2048, true, { ...H200, tiled: null }).kind, 'sgstage');
    assert.strictEqual(product(512, 2048, 2048, true, { ...H200, precision: 'int8' }).kind, 'sgstage');
    assert.strictEqual(product(512, 2048, 2048, true, { ...H200, kernelPath: 'f16' }).kind, 'gemm');
  });

  it('the shader: tiled inputs at binding 6, the split part before the layout, refused off the subgroup-matrix path', () => {
    const s = matmulShader({ ...DEFAULT_TILED.base, split: 4 }, H200);
    assert.deepStrictEqual(s.parts, ['weights_f16_matrix', 'mm_common', 'wlayout_rows', 'sgtile_layout', 'mm_split', 'mm_sgtile']);
    assert.deepStrictEqual(s.bindings, ['uniform', 'read', 'read', 'rw', 'uniform', 'rw', 'read']);
    assert.deepStrictEqual(tileInputShader().bindings, ['uniform', 'read', 'read', 'rw', 'uniform', 'rw', 'rw']);
    const src = shaderSource(s.parts, s.constants);
    assert.match(src, /@binding\(6\) var<storage, read> xt: array<f16>/);
    assert.match(src, /const SPLIT: u32 = 4u;/);
    assert.deepStrictEqual(matmulShader(DEFAULT_TILED.base, H200).bindings, s.bindings);
    // Weights stored as 16×16 blocks: their own layout part and pipeline, each weight tile one contiguous load.
    const b = matmulShader({ ...DEFAULT_TILED.base, split: 4 }, { ...H200, layout: 'blocks' });
    assert.deepStrictEqual(b.parts, ['weights_f16_matrix', 'mm_common', 'wlayout_blocks', 'sgtile_layout', 'mm_split', 'mm_sgtile']);
    assert.notStrictEqual(b.key, s.key);
    assert.match(shaderSource(b.parts, b.constants), /fn w_tile_stride\(s: Seg\) -> u32 \{\s*return 16u;/);
    assert.throws(() => matmulShader(DEFAULT_TILED.base, { ...H200, precision: 'int8' }), /tiled subgroup-matrix kernel needs f16 weights/);
    assert.match(describeKernels(H200), /from 64 rows with inputs tiled as f16 16×16 blocks/);
  });

  it('tiles past 64 tokens pad the tiled inputs to 128; past 64 outputs they run only on groups of whole 128-output tiles', () => {
    const wide = tiledFromEnv({ RWKV_MATMUL_TILED: '4x4x2x2u4@64' })!;
    const c = { ...H200, tiled: wide };
    const at = (rows: number, k: number, n: number, wideOutputs: boolean) => chooseMatmul(rows, c, { k, virtualRows: n, scratchFloats: ROOM, tileable: true, wideOutputs });
    assert.deepStrictEqual(at(512, 2048, 8192, true), { ...wide.large, split: 1 });
    // A group with a segment of 64 outputs (a LoRA down-projection): a 128-output tile would straddle the next one.
    assert.deepStrictEqual(at(512, 2048, 8192, false), { ...DEFAULT_TILED.base, split: 1 });
    assert.strictEqual(tileTokensOf(wide.large), 128);
    assert.strictEqual(tileTokensOf(DEFAULT_TILED.large), 64);
    assert.strictEqual(tiledInputHalves([2048], 130, 128), 256 * 2048);
    assert.strictEqual(tiledInputHalves([2048], 130), 192 * 2048);
    // The three passes of one product agree on the padding.
    const product = matmulShader({ ...wide.large, split: 2 }, H200);
    assert.strictEqual(product.constants.TILE_TOKENS, 128);
    assert.strictEqual(splitReduceShader({ ...wide.large, split: 2 }, H200, 512).constants.TILE_TOKENS, 128);
    assert.strictEqual(tileInputShader(128).constants.TILE_TOKENS, 128);
    assert.notStrictEqual(tileInputShader(128).key, tileInputShader().key);
    assert.match(shaderSource(tileInputShader(128).parts, tileInputShader(128).constants), /const TILE_TOKENS: u32 = 128u;/);
    // Partial sums of whole 128 × 128 tiles: rows to 128, virtual rows to 128.
    assert.strictEqual(splitScratchFloats({ ...wide.large, split: 2 }, 192, 130), 2 * 256 * 256);
  });

  it('a shader is described once per variant and configuration: recording a new call shape generates no code again', () => {
    const v = { ...DEFAULT_TILED.large, split: 2 };
    const first = matmulShader(v, H200);
    assert.strictEqual(matmulShader({ ...v }, { ...H200 }), first, 'an equal variant and configuration reuse the description');
    assert.notStrictEqual(matmulShader({ ...v, split: 4 }, H200), first);
    assert.notStrictEqual(matmulShader(v, { ...H200, layout: 'blocks' }), first);
    assert.notStrictEqual(matmulShader(v, { ...H200, subgroup32: false }), first);
  });

  it('RWKV_MATMUL_TILED_KU: steps of 16 inputs loaded together for tiles that name none, 1 unless set; other values refused', () => {
    assert.strictEqual(tiledUnrollFrom(undefined), DEFAULT_TILED_KU);
    assert.strictEqual(DEFAULT_TILED_KU, 1);
    assert.strictEqual(tiledUnrollFrom('4'), 4);
    assert.throws(() => tiledUnrollFrom('3'), /RWKV_MATMUL_TILED_KU=3: give 1, 2 or 4/);
    // The shader takes the count as a constant; the unrolled trip and the one-step remainder are both in it.
    const { ku: _, ...unnamed } = DEFAULT_TILED.base;
    const src = shaderSource(matmulShader(unnamed, H200).parts, matmulShader(unnamed, H200).constants);
    assert.match(src, /const KU: u32 = 1u;/);
    assert.match(src, /for \(; k0 \+ 0u < span\.y; k0 \+= 16u\)/);
    assert.match(src, /for \(; k0 < span\.y; k0 \+= 16u\)/);
  });
});

describe('tiled products: room for the inputs', () => {
  const group = (ks: number[], format: MatrixGroup['format'] = 'f16'): MatrixGroup =>
    ({ buffer: {} as GPUBuffer, format, segs: ks.map((k, i) => ({ name: `m${i}`, n: 64, k, wOff: 0 })) });

  it('pads rows to whole 64-token tiles and sums the group’s inputs', () => {
    assert.strictEqual(TILE_TOKENS, 64);
    assert.strictEqual(tiledInputHalves([2048, 2048, 2048], 1), 64 * 6144);
    assert.strictEqual(tiledInputHalves([768], 65), 128 * 768);
    assert.deepStrictEqual(tileInputDispatch([768], 65), [Math.ceil((128 * 768) / 8 / 256), 1]);
  });

  it('finds the largest tileable group anywhere in the weights; int8 groups and widths off 16 do not count', () => {
    const layer = { rkv: group([64, 64, 64]), ffnV: group([256]), odd: group([1024, 8]), q: group([4096], 'int8') };
    const weights = { layers: [layer, { ...layer, rkv: group([64, 64, 64, 64]) }], head: group([64]), emb: group([64]) } as unknown as ModelWeights;
    // Groups shared between layers count once.
    assert.strictEqual(matrixGroupsOf(weights).length, 7);
    assert.strictEqual(tileableGroup(layer.odd), false);
    assert.strictEqual(tileableGroup(layer.q), false);
    assert.strictEqual(tiledInputCapacity(weights, 100), 128 * 256);
    assert.strictEqual(tiledInputCapacity({ layers: [{ q: layer.q }] } as unknown as ModelWeights, 100), 0);
  });
});

describe('tiled products: the input-tiling pass on this device', function () {
  this.timeout(120_000);
  let gpu: GpuContext;
  before(async () => {
    gpu = await acquireGpu();
  });
  after(() => releaseGpu(gpu));

  it('writes every segment’s inputs as f16 16×16 blocks after the ones before it, tokens past the batch as zeros', async () => {
    const { device } = gpu;
    const rows = 21;
    const ks = [32, 48];
    const xOffs = [0, 4096];
    const xs = ks.map((k, i) => values(rows * k, 3 + i, 4));
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const xBuf = createBuffer(device, 'x', (xOffs[1] + rows * ks[1]) * 4, S);
    xs.forEach((x, i) => device.queue.writeBuffer(xBuf, xOffs[i] * 4, x));
    const halves = tiledInputHalves(ks, rows);
    const xtBuf = createBuffer(device, 'tiled', halves * 2, S);
    device.queue.writeBuffer(xtBuf, 0, new Uint16Array(halves).fill(0x7e00)); // NaN: every half must be written
    const g: MatrixGroup = { buffer: createBuffer(device, 'W', 16, S), format: 'f16', segs: ks.map((k, i) => ({ name: `m${i}`, n: 16, k, wOff: 0 })) };
    const u = groupUniform('t', g, xOffs.map((xOff) => ({ xOff, yOff: 0 })), false);
    const uBuf = createBuffer(device, 'u', u.words.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    device.queue.writeBuffer(uBuf, 0, u.words);
    const batch = createBuffer(device, 'batch', 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    device.queue.writeBuffer(batch, 0, new Uint32Array([rows, 1, rows, 0]));
    // y and the split parts (unused here) must be two buffers: one writable buffer bound twice is refused.
    const [y, parts] = [createBuffer(device, 'y', 16, S), createBuffer(device, 'parts', 16, S)];
    const t = tileInputShader();
    device.pushErrorScope('validation');
    const kernel = makeKernel(device, t.parts, t.constants, t.bindings);
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(kernel.pipeline);
    pass.setBindGroup(0, bindGroup(device, kernel, [batch, g.buffer, xBuf, y, uBuf, parts, xtBuf]));
    pass.dispatchWorkgroups(...tileInputDispatch(ks, rows));
    pass.end();
    device.queue.submit([enc.finish()]);
    const error = await device.popErrorScope();
    assert.strictEqual(error, null, error?.message);
    const got = new Uint16Array((await readBuffer(device, xtBuf, halves * 2)).buffer);
    // The layout computed here: segment bases, blocks (token block, input block), rows of 16 inputs inside.
    const padded = Math.ceil(rows / 64) * 64;
    let base = 0;
    let checked = 0;
    ks.forEach((k, i) => {
      const want = f32ToF16(xs[i]);
      for (let tok = 0; tok < padded; tok++) {
        for (let c = 0; c < k; c++) {
          const h = base + (Math.floor(tok / 16) * (k / 16) + Math.floor(c / 16)) * 256 + (tok % 16) * 16 + (c % 16);
          const expect = tok < rows ? f16BitsToF32(want[tok * k + c]) : 0;
          assert.strictEqual(f16BitsToF32(got[h]), expect, `segment ${i}, token ${tok}, input ${c}`);
          checked++;
        }
      }
      base += padded * k;
    });
    assert.strictEqual(checked, halves);
  });

  // 21 tokens take the 1 × 1 shape, 150 the 4 × 4 one (matmul.ts reduceShape), with a last invocation's 4 tokens
  // and 4 rows both ending part-way.
  for (const [rows, split] of [[21, 2], [150, 2], [21, 32]]) it(`the reduction adds every split’s partial sums from the padded layout, then stores as every product stores (${rows} tokens, ${split} splits)`, async () => {
    const { device } = gpu;
    const ns = [20, 42];
    const g: Omit<MatrixGroup, 'buffer'> = { format: 'f16', segs: ns.map((n, i) => ({ name: `m${i}`, n, k: 16, wOff: 0 })) };
    // Matrix 0 through tanh into y[0 ..), matrix 1 added into y after it.
    const yOffs = [0, rows * ns[0]];
    const u = groupUniform('r', { ...g, buffer: {} as GPUBuffer }, [{ xOff: 0, yOff: yOffs[0], act: 1 }, { xOff: 0, yOff: yOffs[1], accum: true }], false);
    assert.strictEqual(u.virtualRows, 64 + 42);
    const v = { ...DEFAULT_TILED.base, split };
    const partFloats = splitScratchFloats(v, u.virtualRows, rows);
    const stride = 128;
    const padded = Math.ceil(rows / 64) * 64;
    assert.strictEqual(partFloats, split * padded * stride);
    const part = values(partFloats, 9);
    const yInit = values(yOffs[1] + rows * ns[1], 13);
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const mk = (label: string, data: Float32Array | Uint32Array, usage = S) => {
      const b = createBuffer(device, label, data.byteLength, usage);
      device.queue.writeBuffer(b, 0, data);
      return b;
    };
    const resources = [
      mk('batch', new Uint32Array([rows, 1, rows, 0]), GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST),
      createBuffer(device, 'W', 16, S), createBuffer(device, 'x', 16, S), mk('y', yInit),
      mk('group', u.words, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST), mk('parts', part), createBuffer(device, 'tiled', 16, S),
    ];
    // The f16 weight prelude of this device's path stands in for the subgroup-matrix one (same row scale of 1).
    const r = splitReduceShader(v, H200, rows);
    assert.deepStrictEqual([r.constants.VR, r.constants.RT], rows >= 128 ? [4, 4] : [1, 1]);
    const kernel = makeKernel(device, r.parts.map((p) => (p === 'weights_f16_matrix' ? 'weights_f16' : p)), r.constants, r.bindings);
    device.pushErrorScope('validation');
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(kernel.pipeline);
    pass.setBindGroup(0, bindGroup(device, kernel, resources));
    pass.dispatchWorkgroups(...splitReduceDispatch(u.virtualRows, rows));
    pass.end();
    device.queue.submit([enc.finish()]);
    const error = await device.popErrorScope();
    assert.strictEqual(error, null, error?.message);
    const y = await readBuffer(device, resources[3], yInit.byteLength);
    // Added in split order, in f32, as the kernel adds them.
    const sum = (t: number, vrow: number) => {
      let acc = 0;
      for (let z = 0; z < split; z++) acc = Math.fround(acc + part[(z * padded + t) * stride + vrow]);
      return acc;
    };
    for (let t = 0; t < rows; t++) {
      for (let o = 0; o < ns[0]; o++) assert.ok(Math.abs(y[yOffs[0] + t * ns[0] + o] - Math.tanh(sum(t, o))) < 1e-6, `matrix 0, token ${t}, output ${o}`);
      for (let o = 0; o < ns[1]; o++) {
        const i = yOffs[1] + t * ns[1] + o;
        assert.ok(Math.abs(y[i] - (yInit[i] + sum(t, 64 + o))) < 1e-6, `matrix 1, token ${t}, output ${o}`);
      }
    }
  });
});
