// f16 weights as 16×16 blocks (engine/rwkv7/weight-blocks.ts): the device-side reordering the kernels' layout part
// (shaders/wlayout_blocks.wgsl) reads, its refusals, and the switch. The golden tests run the model through it.
import { strict as assert } from 'node:assert';
import { blockable, blockIndex, uploadBlocks, weightLayoutFor } from '../engine/rwkv7/weight-blocks';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { readBuffer } from './grouped-product';
import { DEFAULT_STAGED, DEFAULT_TILED, matmulShader, type MatmulConfig, type MatmulVariant } from '../engine/rwkv7/matmul';
import { shaderSource } from '../engine/gpu/shader-source';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { describeModel } from '../engine/model-spec';
import { uploadRwkv7 } from '../engine/rwkv7/weights';
import { matrixGroupsOf } from '../engine/rwkv7/tiled-inputs';

describe('weights as 16×16 blocks', () => {
  let gpu: GpuContext;
  before(async () => {
    gpu = await acquireGpu();
  });

  /** The group buffer's halves as uploadBlocks leaves them. */
  async function halvesOf(buf: GPUBuffer | null, halves: number): Promise<Uint16Array> {
    if (!buf) throw new Error('the reorder returned no buffer');
    const words = await readBuffer(gpu.device, buf, Math.ceil(halves / 8) * 16);
    return new Uint16Array(words.buffer, 0, halves);
  }

  it('reorders on the device: every weight where the blocks layout reads it, matrices side by side, the rest zeros', async () => {
    const shapes = [[32, 48], [16, 16], [48, 64], [64, 1056]] as const;
    let at = 0;
    const mats = shapes.map(([n, k], i) => {
      const m = { data: new Uint16Array(n * k).map((_, j) => (j * 7919 + 13 * i + 1) & 0xffff), n, k, wOff: at / 8 };
      at += n * k;
      return m;
    });
    const halves = at + 16 * 1056; // zero rows after the last matrix, as a group pads to whole segments
    const got = await halvesOf(await uploadBlocks(gpu.device, 'test', mats, halves), halves);
    for (const m of mats)
      for (let o = 0; o < m.n; o++)
        for (let i = 0; i < m.k; i++) assert.equal(got[8 * m.wOff + blockIndex(o, i, m)], m.data[o * m.k + i], `weight (${o}, ${i}) of ${m.n}×${m.k}`);
    for (let j = at; j < halves; j++) assert.equal(got[j], 0, `padding half ${j}`);
    // Input by input: the same matrices, each where wlayout_input_blocks.wgsl reads it.
    const byInput = await halvesOf(await uploadBlocks(gpu.device, 'test', mats, halves, 'input-blocks'), halves);
    for (const m of mats)
      for (let o = 0; o < m.n; o++)
        for (let i = 0; i < m.k; i++) assert.equal(byInput[8 * m.wOff + blockIndex(o, i, m, 'input-blocks')], m.data[o * m.k + i], `by input: weight (${o}, ${i}) of ${m.n}×${m.k}`);
    for (let j = at; j < halves; j++) assert.equal(byInput[j], 0, `by input: padding half ${j}`);
  });

  it('reorders a matrix dispatched in two dimensions (a 7B head is 65,536 workgroups of runs; here 3 a row)', async () => {
    const [n, k] = [160, 512]; // 5,120 runs: 20 workgroups, 7 rows of 3, the last row short
    const data = new Uint16Array(n * k).map((_, j) => (j * 40503 + 7) & 0xffff);
    const got = await halvesOf(await uploadBlocks(gpu.device, 'two-d', [{ data, n, k, wOff: 0 }], n * k, 'blocks', 3), n * k);
    for (let o = 0; o < n; o++) for (let i = 0; i < k; i++) assert.equal(got[blockIndex(o, i, { n, k })], data[o * k + i], `weight (${o}, ${i})`);
  });

  /** The real device, except that every out-of-memory error scope reports an error (the scopes still pop in order). */
  function outOfMemoryDevice(): GPUDevice {
    const real = gpu.device;
    const scopes: GPUErrorFilter[] = [];
    return new Proxy(real, {
      get(target, prop) {
        if (prop === 'pushErrorScope') return (filter: GPUErrorFilter) => (scopes.push(filter), target.pushErrorScope(filter));
        if (prop === 'popErrorScope')
          return async () => {
            const filter = scopes.pop();
            const e = await target.popErrorScope();
            return filter === 'out-of-memory' ? (e ?? { message: 'test: out of memory' }) : e;
          };
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  }

  it('out of device memory while reordering, a group keeps its rows and the model still loads', async () => {
    const data = new Uint16Array(32 * 64).fill(0x3c00);
    assert.equal(await uploadBlocks(outOfMemoryDevice(), 'oom', [{ data, n: 32, k: 64, wOff: 0 }], 32 * 64), null);
    const ck = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, vocabSize: 128, dtype: 'f16', seed: 5 });
    const info = describeModel(ck);
    const layouts = async (device: GPUDevice) =>
      matrixGroupsOf(await uploadRwkv7(device, ck, info, { precision: 'f16', quantLayers: 0 }, { layout: 'blocks' })).map((g) => g.layout ?? 'rows');
    const normal = await layouts(gpu.device);
    assert.ok(normal.includes('blocks'), normal.join());
    const short = await layouts(outOfMemoryDevice());
    assert.deepStrictEqual([...new Set(short)], ['rows']);
    assert.equal(short.length, normal.length);
  });

  it('keeps a 16-row strip in place and each block of it contiguous', () => {
    const k = 64;
    assert.equal(blockIndex(16, 0, { n: 48, k }), 16 * k); // strip 1 starts where row 16 did
    assert.equal(blockIndex(0, 16, { n: 48, k }), 256); // block 1 of strip 0 follows block 0
    assert.equal(blockIndex(1, 0, { n: 48, k }), 16); // row 1 of a block is 16 halves on
    assert.equal(blockIndex(15, 63, { n: 48, k }), 3 * 256 + 15 * 16 + 15);
    // Input by input (48 rows: 3 strips): the strips' blocks of one input range side by side.
    assert.equal(blockIndex(16, 0, { n: 48, k }, 'input-blocks'), 256); // strip 1's first block follows strip 0's
    assert.equal(blockIndex(0, 16, { n: 48, k }, 'input-blocks'), 3 * 256); // inputs 16.. after all 3 strips' first blocks
    assert.equal(blockIndex(47, 63, { n: 48, k }, 'input-blocks'), (3 * 3 + 2) * 256 + 15 * 16 + 15);
  });

  it('refuses matrices that are not whole blocks, and ranges that overrun the buffer, before touching the device', async () => {
    assert.equal(blockable({ n: 16, k: 32 }), true);
    assert.equal(blockable({ n: 40, k: 32 }), false);
    const m = (n: number, k: number, wOff = 0, len = n * k) => [{ data: new Uint16Array(len), n, k, wOff }];
    await assert.rejects(uploadBlocks(gpu.device, 'g', m(40, 32), 40 * 32), /g: a 40×32 matrix is not whole 16×16 blocks/);
    await assert.rejects(uploadBlocks(gpu.device, 'g', m(16, 32, 1), 16 * 32), /overruns 512 halves/);
    await assert.rejects(uploadBlocks(gpu.device, 'g', m(16, 32, 0, 10), 16 * 32), /10 halves are not a 16×32 matrix/);
  });

  it('is on by default on the subgroup-matrix path only; RWKV_WEIGHT_BLOCKS=on|off|by-input overrides; other values are refused', () => {
    assert.equal(weightLayoutFor('subgroup-matrix', {}), 'blocks');
    assert.equal(weightLayoutFor('f16', {}), 'rows');
    assert.equal(weightLayoutFor('f32', {}), 'rows');
    assert.equal(weightLayoutFor('subgroup-matrix', { RWKV_WEIGHT_BLOCKS: 'off' }), 'rows');
    assert.equal(weightLayoutFor('f16', { RWKV_WEIGHT_BLOCKS: 'on' }), 'blocks');
    assert.equal(weightLayoutFor('subgroup-matrix', { RWKV_WEIGHT_BLOCKS: 'by-input' }), 'input-blocks');
    assert.throws(() => weightLayoutFor('f16', { RWKV_WEIGHT_BLOCKS: 'yes' }), /RWKV_WEIGHT_BLOCKS: 'yes' is not 'on', 'off' or 'by-input'/);
  });

  it('every product kernel reads weights through its group\'s layout: the blocks part, or the streaming kernel\'s blocks form', () => {
    const h200: MatmulConfig = { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, vecMaxRows: 4, gemmTile: 64, splitK: true, staged: DEFAULT_STAGED, tiled: DEFAULT_TILED };
    const variants: MatmulVariant[] = [
      { kind: 'gemm', tile: 64 }, { kind: 'gemm', tile: 64, split: 4 }, { kind: 'gemm', tile: 16 },
      { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64, split: 8 }, { ...DEFAULT_STAGED.large.variant, split: 2 }, { ...DEFAULT_TILED.large, split: 2 }, { ...DEFAULT_TILED.medium, split: 2 }, { ...DEFAULT_TILED.base, split: 2 },
    ];
    for (const v of variants) {
      const rows = matmulShader(v, h200);
      const blocks = matmulShader(v, { ...h200, layout: 'blocks' });
      const byInput = matmulShader(v, { ...h200, layout: 'input-blocks' });
      assert.ok(rows.parts.includes('wlayout_rows') && !rows.parts.includes('wlayout_blocks'), `${rows.key}: ${rows.parts}`);
      assert.ok(blocks.parts.includes('wlayout_blocks') && !blocks.parts.includes('wlayout_rows'), `${blocks.key}: ${blocks.parts}`);
      assert.ok(byInput.parts.includes('wlayout_input_blocks') && !byInput.parts.includes('wlayout_blocks'), `${byInput.key}: ${byInput.parts}`);
      assert.strictEqual(new Set([rows.key, blocks.key, byInput.key]).size, 3);
      // No kernel addresses weights by a layout's formula itself: only the layout part's functions do.
      for (const b of [blocks, byInput])
        assert.doesNotMatch(shaderSource(b.parts, b.constants).replace(/fn w8_at[\s\S]*?\n}\n|fn w_tile_at[\s\S]*?\n}\n/g, ''), /w_off \+ \(|w_off \* 8u \+|\* k \+ w_tile_k|\* 32u\)/, b.key);
    }
    const vec = matmulShader({ kind: 'vec', tb: 4 }, { ...h200, layout: 'blocks' });
    assert.ok(vec.parts.includes('mm_vec_blocks'), vec.parts.join());
    const vecByInput = matmulShader({ kind: 'vec', tb: 4 }, { ...h200, layout: 'input-blocks' });
    assert.ok(vecByInput.parts.includes('mm_vec_blocks') && vecByInput.parts.includes('wlayout_input_blocks'), vecByInput.parts.join());
    // The streaming kernel steps from block to block by the layout's step, not strip by strip's 32 units.
    assert.doesNotMatch(shaderSource(vecByInput.parts, vecByInput.constants), /\* 32u\)/);
    assert.throws(() => matmulShader({ kind: 'vec', tb: 4, lpr: 64 }, { ...h200, layout: 'blocks' }), /8 rows a workgroup/);
  });
});
