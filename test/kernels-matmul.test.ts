// Kernel paths (engine/gpu/capabilities.ts) and the matrix kernels of each path that runs here
// (engine/rwkv7/matmul.ts): the path decision from adapter facts, and the products of the 'f32' and 'f16' paths
// on the real device (lavapipe here) against a float64 reference, with several segments, activations and
// residual accumulation. The 'subgroup-matrix' kernels need a GPU with subgroup matrices (bench/matmul.ts and
// bench/golden-check.ts check them there); here only their selection and shader assembly are checked.

import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import * as path from 'path';
import {
  AdapterCapabilities,
  chooseKernelPath,
  featuresFor,
  SUBGROUP_MATRIX_FEATURE,
} from '../engine/gpu/capabilities';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { shaderSource } from '../engine/gpu/shader-source';
import { chooseMatmul, matmulShader, type MatmulVariant } from '../engine/rwkv7/matmul';
import { uploadRwkv7 } from '../engine/rwkv7/weights';
import { DEFAULT_VEC_LOADS } from '../engine/rwkv7/vec-loads';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { f16GroupedProduct, writtenRelL2 } from './grouped-product';
import { describeModel } from '../engine/model-spec';

const H200: AdapterCapabilities = {
  features: new Set(['subgroups', 'shader-f16', 'timestamp-query', SUBGROUP_MATRIX_FEATURE]),
  subgroupMinSize: 32,
  subgroupMaxSize: 32,
  subgroupMatrixConfigs: [
    { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16 },
    { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 8, K: 16 },
    { componentType: 'i8', resultComponentType: 'i32', M: 16, N: 16, K: 32 },
  ],
};
const LAVAPIPE: AdapterCapabilities = { features: new Set(['subgroups', 'shader-f16']), subgroupMinSize: 8, subgroupMaxSize: 8, cpuDriver: true };

describe('kernel paths: chosen from what the adapter offers', () => {
  it('a GPU with f16×f16→f32 16×16×16 subgroup matrices and 32-lane subgroups runs subgroup-matrix', () => {
    assert.equal(chooseKernelPath(H200), 'subgroup-matrix');
    assert.deepEqual(featuresFor('subgroup-matrix'), ['shader-f16', SUBGROUP_MATRIX_FEATURE]);
  });

  it('without a usable subgroup-matrix configuration it runs f16, and says why when subgroup-matrix is asked for', () => {
    const noConfig = { ...H200, subgroupMatrixConfigs: H200.subgroupMatrixConfigs!.filter((c) => c.N !== 16) };
    assert.equal(chooseKernelPath(noConfig), 'f16');
    assert.throws(() => chooseKernelPath(noConfig, 'subgroup-matrix'), /no f16×f16→f32 16×16×16 subgroup-matrix configuration/);
    const wide = { ...H200, subgroupMinSize: 64, subgroupMaxSize: 64 };
    assert.equal(chooseKernelPath(wide), 'f16');
    assert.throws(() => chooseKernelPath(wide, 'subgroup-matrix'), /not exactly 32 lanes/);
    const unsafeOff = { ...H200, features: new Set([...H200.features].filter((f) => f !== SUBGROUP_MATRIX_FEATURE)) };
    assert.throws(() => chooseKernelPath(unsafeOff, 'subgroup-matrix'), /no chromium-experimental-subgroup-matrix/);
  });

  it('without shader-f16 only f32 runs; a CPU driver runs f32 unless f16 is asked for', () => {
    const noF16 = { ...H200, features: new Set(['subgroups']) };
    assert.equal(chooseKernelPath(noF16), 'f32');
    assert.throws(() => chooseKernelPath(noF16, 'f16'), /no shader-f16/);
    assert.equal(chooseKernelPath(LAVAPIPE), 'f32');
    assert.equal(chooseKernelPath(LAVAPIPE, 'f16'), 'f16');
    assert.equal(chooseKernelPath(H200, 'f32'), 'f32');
  });

  it('RWKV_MATMUL_VEC_LANES picks the lanes a row of every streaming product; other values are refused by name', () => {
    const lanes = (v: string | undefined) =>
      execFileSync(process.execPath, ['-e', `const m = require(${JSON.stringify(path.join(__dirname, '../engine/rwkv7/matmul.js'))});
        console.log(JSON.stringify(m.chooseMatmul(1, { kernelPath: 'f16', precision: 'f16', subgroup32: true, vecMaxRows: 8, gemmTile: 64 })))`],
      { env: { ...process.env, RWKV_MATMUL_VEC_LANES: v ?? '' }, encoding: 'utf8', stdio: 'pipe' }).trim();
    assert.equal(lanes(undefined), JSON.stringify({ kind: 'vec', tb: 4 }));
    assert.equal(lanes('128'), JSON.stringify({ kind: 'vec', tb: 4, lpr: 128 }));
    assert.throws(() => lanes('96'), /RWKV_MATMUL_VEC_LANES=96: give 32, 64, 128 or 256/);
  });

  it('RWKV_MATMUL_VEC_LOADS picks the loads a trip of every streaming kernel, over rows and blocks; other values are refused by name', () => {
    const shader = (v: string | undefined) =>
      execFileSync(process.execPath, ['-e', `const m = require(${JSON.stringify(path.join(__dirname, '../engine/rwkv7/matmul.js'))});
        const c = { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true };
        const rows = m.matmulShader({ kind: 'vec', tb: 4 }, c), blocks = m.matmulShader({ kind: 'vec', tb: 4 }, { ...c, layout: 'blocks' });
        console.log(JSON.stringify([rows.key, rows.constants.LOADS, blocks.key, blocks.constants.LOADS]))`],
      { env: { ...process.env, RWKV_MATMUL_VEC_LOADS: v ?? '' }, encoding: 'utf8', stdio: 'pipe' }).trim();
    assert.equal(shader(undefined), JSON.stringify([`mm_vec4u${DEFAULT_VEC_LOADS}:weights_f16_native`, DEFAULT_VEC_LOADS, `mm_vec_blocks4u${DEFAULT_VEC_LOADS}:weights_f16_native:blocks`, DEFAULT_VEC_LOADS]));
    assert.equal(shader('8'), JSON.stringify(['mm_vec4u8:weights_f16_native', 8, 'mm_vec_blocks4u8:weights_f16_native:blocks', 8]));
    assert.throws(() => shader('3'), /RWKV_MATMUL_VEC_LOADS=3: give 1, 2, 4 or 8/);
  });

  it('subgroup-matrix kernels run only for f16 weights on that path, between the streaming kernel and 128 rows', () => {
    const base = { kernelPath: 'subgroup-matrix' as const, subgroup32: true, vecMaxRows: 8, gemmTile: 64 as const };
    assert.equal(chooseMatmul(8, { ...base, precision: 'f16' }).kind, 'vec');
    assert.deepEqual(chooseMatmul(9, { ...base, precision: 'f16' }), { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 });
    assert.deepEqual(chooseMatmul(128, { ...base, precision: 'f16' }), { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 });
    assert.deepEqual(chooseMatmul(129, { ...base, precision: 'f16' }), { kind: 'gemm', tile: 64 });
    assert.deepEqual(chooseMatmul(512, { ...base, precision: 'f32' }), { kind: 'gemm', tile: 64 });
    assert.deepEqual(chooseMatmul(512, { ...base, kernelPath: 'f16', precision: 'f16' }), { kind: 'gemm', tile: 64 });
    const v: MatmulVariant = { kind: 'sgmat', mt: 4, nt: 1, sgs: 4, kc: 64 };
    assert.throws(() => matmulShader(v, { kernelPath: 'f16', precision: 'f16', subgroup32: true }), /needs f16 weights on a subgroup-matrix device/);
    // Directives of every part come first, once each, whatever part names them.
    const s = matmulShader(v, { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true });
    const src = shaderSource(s.parts, s.constants);
    const lines = src.split('\n').filter((l) => l.trim() && !l.trim().startsWith('//'));
    assert.deepEqual(lines.slice(0, 3), [
      'enable f16;',
      'enable chromium_experimental_subgroup_matrix;',
      'diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);',
    ]);
    assert.equal(src.match(/^\s*enable /gm)!.length, 2);
  });
});

describe('matrix kernels on the kernel paths of this device', function () {
  this.timeout(300_000);
  const devices = new Map<string, GpuContext>();
  after(() => {
    for (const d of devices.values()) releaseGpu(d);
  });

  // On the 'f16' path lavapipe compiles each matrix kernel for 10–30 s: the 8-token streaming and 16-token tiled
  // kernels are left to golden.test.ts there (the code they share with the f32 path is the weight prelude).
  const cases: [('f32' | 'f16'), MatmulVariant, number, boolean?, boolean?][] = [
    ['f32', { kind: 'vec', tb: 4 }, 3],
    ['f32', { kind: 'vec', tb: 8 }, 13],
    // More lanes a row (engine/rwkv7/vec-lanes.ts): rows split across subgroups, short and long K.
    ['f32', { kind: 'vec', tb: 4, lpr: 64 }, 3],
    ['f32', { kind: 'vec', tb: 4, lpr: 32 }, 3, true],
    ['f32', { kind: 'vec', tb: 4, lpr: 128 }, 3, true],
    ['f32', { kind: 'vec', tb: 8, lpr: 256 }, 6, true],
    // Loads a lane issues together (engine/rwkv7/vec-loads.ts): full trips and the one-load remainder.
    ['f32', { kind: 'vec', tb: 4, loads: 1 }, 3, true],
    ['f32', { kind: 'vec', tb: 4, loads: 4 }, 3, true],
    ['f32', { kind: 'vec', tb: 8, loads: 8 }, 11, true],
    ['f32', { kind: 'vec', tb: 4, lpr: 128, loads: 8 }, 2, true],
    // Over weights stored as 16×16 blocks (mm_vec_blocks.wgsl), short K and long.
    ['f32', { kind: 'vec', tb: 4, loads: 2 }, 3, false, true],
    ['f32', { kind: 'vec', tb: 4, loads: 1 }, 3, true, true],
    ['f32', { kind: 'vec', tb: 4, loads: 4 }, 3, true, true],
    ['f32', { kind: 'vec', tb: 8, loads: 8 }, 13, true, true],
    ['f32', { kind: 'gemm', tile: 64 }, 70],
    ['f32', { kind: 'gemm', tile: 16 }, 21],
    // Split K (mm_split.wgsl + mm_split_reduce.wgsl): 3 splits of K = 64 and 32 leave empty ranges, which must add 0.
    ['f32', { kind: 'gemm', tile: 64, split: 2 }, 70],
    ['f32', { kind: 'gemm', tile: 64, split: 3 }, 37],
    // From 128 rows the reduction sums 4 rows × 4 tokens an invocation (matmul.ts reduceShape): 130 ends part-way.
    ['f32', { kind: 'gemm', tile: 64, split: 3 }, 130],
    ['f16', { kind: 'vec', tb: 4 }, 3],
    ['f16', { kind: 'gemm', tile: 64 }, 70],
  ];
  const results = new Map<string, Float32Array>();
  for (const [path, v, rows, wide, blocks] of cases) {
    const split = v.kind !== 'vec' && (v.split ?? 1) > 1 ? `, K split ${v.split} ways` : '';
    const loads = v.kind === 'vec' && v.loads ? `, ${v.loads} loads a trip` : '';
    const over = blocks ? ', weights as 16×16 blocks' : '';
    const label = (v.kind === 'vec' ? `streaming (${v.tb} tokens a pass, ${v.lpr ?? 32} lanes a row${loads}${wide ? ', long K' : ''}${over})` : v.kind === 'gemm' ? `tiled (${v.tile}-token tiles)` : 'subgroup matrices') + split;
    it(`'${path}' path, ${label}, ${rows} tokens: matches float64, every output written`, async () => {
      if (!devices.has(path)) devices.set(path, await acquireGpu({ kernelPath: path }));
      const gpu = devices.get(path)!;
      assert.equal(gpu.kernelPath, path);
      assert.equal(gpu.features.has('shader-f16'), path === 'f16', 'the f32 path must not even request shader-f16');
      const { got, want } = await f16GroupedProduct(gpu, v, rows, wide, blocks);
      const err = writtenRelL2(got, want);
      assert.ok(err < 1e-6, `relative L2 error ${err}`);
      // Both paths do f32 arithmetic on the same f16 values: the same kernel gives the same bits.
      const key = `${JSON.stringify(v)}:${rows}:${!!wide}:${!!blocks}`;
      const other = results.get(key);
      if (other) assert.deepEqual(got, other, `'${path}' differs from the other path`);
      else results.set(key, got);
    });
  }

  it('f16 weight groups are padded with zero rows to the 64-row segment alignment (whole-tile reads stay inside)', async () => {
    if (!devices.has('f32')) devices.set('f32', await acquireGpu({ kernelPath: 'f32' }));
    const { device } = devices.get('f32')!;
    const ck = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, vocabSize: 100, dtype: 'f16', seed: 3 });
    const info = describeModel(ck);
    const w16 = await uploadRwkv7(device, ck, info, { precision: 'f16', quantLayers: 0 });
    const w32 = await uploadRwkv7(device, ck, info, { precision: 'f32', quantLayers: 0 });
    // head: 100 rows × 64 → 128 rows as f16; f32 buffers are not padded.
    assert.equal(w16.head.buffer.size, 128 * 64 * 2);
    assert.equal(w32.head.buffer.size, 100 * 64 * 4);
  });
});
