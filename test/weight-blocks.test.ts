// f16 weights as 16×16 blocks (engine/rwkv7/weight-blocks.ts): the host-side reordering the kernels' layout part
// (shaders/wlayout_blocks.wgsl) reads, its refusals, and the switch. The golden tests run the model through it.
import { strict as assert } from 'node:assert';
import { blockable, blockIndex, weightBlocksFor, writeBlocks } from '../engine/rwkv7/weight-blocks';

describe('weights as 16×16 blocks', () => {
  it('puts every weight where the blocks layout reads it, matrices side by side, on both copy paths', async () => {
    for (const [n, k, at] of [[32, 48, 0], [16, 16, 256], [48, 64, 1], [64, 1056, 0]] as const) {
      const rows = new Uint16Array(n * k).map((_, i) => (i * 7919 + 13) & 0xffff);
      const out = new Uint16Array(at + n * k + 16).fill(0xabcd);
      await writeBlocks(rows, n, k, out, at);
      for (let o = 0; o < n; o++) for (let i = 0; i < k; i++) assert.equal(out[at + blockIndex(o, i, k)], rows[o * k + i], `weight (${o}, ${i}) of ${n}×${k}`);
      // Nothing outside the matrix's range is written.
      for (let j = 0; j < at; j++) assert.equal(out[j], 0xabcd);
      for (let j = at + n * k; j < out.length; j++) assert.equal(out[j], 0xabcd);
    }
  });

  it('keeps a 16-row strip in place and each block of it contiguous', () => {
    const k = 64;
    assert.equal(blockIndex(16, 0, k), 16 * k); // strip 1 starts where row 16 did
    assert.equal(blockIndex(0, 16, k), 256); // block 1 of strip 0 follows block 0
    assert.equal(blockIndex(1, 0, k), 16); // row 1 of a block is 16 halves on
    assert.equal(blockIndex(15, 63, k), 3 * 256 + 15 * 16 + 15);
  });

  it('refuses matrices that are not whole blocks, and writes that overrun', async () => {
    assert.equal(blockable({ n: 16, k: 32 }), true);
    assert.equal(blockable({ n: 40, k: 32 }), false);
    await assert.rejects(writeBlocks(new Uint16Array(40 * 32), 40, 32, new Uint16Array(40 * 32), 0), /40×32 matrix is not whole 16×16 blocks/);
    await assert.rejects(writeBlocks(new Uint16Array(16 * 32), 16, 32, new Uint16Array(16 * 32), 1), /overruns/);
    await assert.rejects(writeBlocks(new Uint16Array(10), 16, 32, new Uint16Array(16 * 32), 0), /not a 16×32 matrix/);
  });

  it('is on by default on the subgroup-matrix path only; RWKV_WEIGHT_BLOCKS=on|off overrides; other values are refused', () => {
    assert.equal(weightBlocksFor('subgroup-matrix', {}), true);
    assert.equal(weightBlocksFor('f16', {}), false);
    assert.equal(weightBlocksFor('f32', {}), false);
    assert.equal(weightBlocksFor('subgroup-matrix', { RWKV_WEIGHT_BLOCKS: 'off' }), false);
    assert.equal(weightBlocksFor('f16', { RWKV_WEIGHT_BLOCKS: 'on' }), true);
    assert.throws(() => weightBlocksFor('f16', { RWKV_WEIGHT_BLOCKS: 'yes' }), /RWKV_WEIGHT_BLOCKS: 'yes' is not 'on' or 'off'/);
  });
});
