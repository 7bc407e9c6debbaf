// Kernels writing the f16 blocks of the tiled product after them, on the subgroup-matrix path emulated on lavapipe:
// - the norm + token-shift kernel (engine/rwkv7/norm-tiles.ts, shaders/ln_shift_tiles.wgsl): the products that read
//   the norm's mixes first (the r/k/v group, with the first LoRAs in fused decode steps, and the FFN key);
// - a tiled product whose results the next reads whole (shaders/sgtile_blocks_out.wgsl: the FFN key for the value, the
//   first LoRA stages for the second), unsplit in its own epilogue, split in its reduction pass.
// Those products lose their tiling pass, and every logit is the same bits as with the passes (the same f32 values
// converted to f16).

import * as assert from 'assert';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { normRows, normTileWrites } from '../engine/rwkv7/norm-tiles';
import { readSafetensors } from '../engine/loader/safetensors';
import { toI32 } from '../engine/loader/dtype';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

/**
 * Every logit of `run` (on a backend reset to zero states), first with the blocks written by the kernels before the
 * products switched off (the tiling passes run), then on: the two must be the same bits. The switches end on.
 */
async function sameBitsOffAndOn(be: Backend, slots: number, run: () => Promise<(Float32Array | null)[]>): Promise<void> {
  const rt = be as unknown as Rwkv7Runtime;
  const logits = async (on: boolean) => {
    rt.normTiles = on;
    rt.productBlocks = on;
    for (let s = 0; s < slots; s++) be.resetState(s);
    return (await run()).map((o) => Array.from(o!));
  };
  try {
    const off = await logits(false);
    assert.deepStrictEqual(await logits(true), off);
  } finally {
    rt.normTiles = true;
    rt.productBlocks = true;
  }
}

describe('norm tiles: the code', () => {
  it('writes segment i from its mix; runs over the rows padded to the product\'s token tiles', () => {
    assert.strictEqual(
      normTileWrites([0, 2, 3, 1]),
      ['xt[0u * seg + w] = pack2x16float(vec2<f32>(a[0u], b[0u]));', 'xt[1u * seg + w] = pack2x16float(vec2<f32>(a[2u], b[2u]));',
        'xt[2u * seg + w] = pack2x16float(vec2<f32>(a[3u], b[3u]));', 'xt[3u * seg + w] = pack2x16float(vec2<f32>(a[1u], b[1u]));'].join('\n  '),
    );
    assert.strictEqual(normRows(72, { segMix: [0], tileTokens: 64 }), 128);
    assert.strictEqual(normRows(64, { segMix: [0], tileTokens: 64 }), 64);
    assert.strictEqual(normRows(72, { segMix: [0], tileTokens: 128 }), 128);
    assert.strictEqual(normRows(72, null), 72);
  });
});

describe('norm tiles on the subgroup-matrix path (emulated where the device has none)', function () {
  this.timeout(900_000);
  let gpu: GpuContext;
  let be: Backend;
  let tokens: number[];
  before(async function () {
    requireGolden(this, path.join(GOLDEN, 'v7-tiny.pth'), path.join(GOLDEN, 'v7-tiny.golden.st'));
    gpu = await acquireGpu({ kernelPath: 'subgroup-matrix', emulateSubgroupMatrix: true });
    tokens = Array.from(toI32(readSafetensors(path.join(GOLDEN, 'v7-tiny.golden.st')).tensors.get('tokens')!));
    be = await createBackend({ model: path.join(GOLDEN, 'v7-tiny.pth'), slots: 4, precision: 'f16', gpu });
  });
  after(() => {
    be?.dispose();
    if (gpu) releaseGpu(gpu);
  });

  const runtime = () => be as unknown as Rwkv7Runtime;

  it('leaves out the tiling pass of the products that read the norm\'s mixes, and only theirs', () => {
    const rt = runtime();
    // `rwkv-flow info` says so.
    assert.match(be.kernelPath, /f16 blocks written by the norms \(RWKV_NORM_TILES=off: not\) and the products before them \(RWKV_PRODUCT_BLOCKS=off: not\)/);
    const labels = (on: boolean, T: number, J: number) => {
      rt.normTiles = on;
      return rt.dispatchLabels(T, J, J).filter((l) => l.endsWith(':tile')).map((l) => l.replace(/^[^:]*:/, ''));
    };
    try {
      // Three sequences at once (72 tokens: the base tiles, padded to 128 tokens): the layer norms' r/k/v and FFN key,
      // and the group norm's output product; a decode step of 64 jobs: the r/k/v group with the first LoRA stages, the
      // FFN key, and the fused time mix's output product.
      // The fused kernel writes the output product's blocks where the device binds a ninth storage buffer a stage.
      const fusedO = gpu.device.limits.maxStorageBuffersPerShaderStage > 8 ? ['o'] : [];
      const cases: [number, number, string[]][] = [[3 * tokens.length, 3, ['rkv', 'lora1', 'fk', 'o']], [64, 64, ['rkv+lora1', 'fk', ...fusedO]]];
      for (const [T, J, gone] of cases) {
        const off = labels(false, T, J);
        const on = labels(true, T, J);
        for (const p of gone) assert.ok(off.includes(`${p}:tile`), `${T} tokens, off: ${off}`);
        assert.deepStrictEqual(on, off.filter((l) => !gone.some((p) => l === `${p}:tile`)), `${T} tokens in ${J} jobs`);
      }
    } finally {
      rt.normTiles = true;
    }
  });

  it('the FFN key and the first LoRA stages store the next product\'s blocks: its tiling pass goes', () => {
    const rt = runtime();
    const labels = (on: boolean, T: number, J: number) => {
      rt.productBlocks = on;
      return rt.dispatchLabels(T, J, J).filter((l) => /:(fk|fv)(:|$)/.test(l));
    };
    try {
      // v7-tiny's products are too short to split: three sequences at once (72 tokens, padded to 128) are tiled.
      const T = 3 * tokens.length;
      const off = labels(false, T, 3);
      const on = labels(true, T, 3);
      assert.ok(off.some((l) => l.endsWith(':fv:tile')), `off: ${off}`);
      assert.ok(!on.some((l) => l.endsWith(':fv:tile')), `on: ${on}`);
      assert.ok(on.some((l) => /^mm_sgtile\d+x\d+x\d+x\d+(k\d)?b:fk$/.test(l)), `on: ${on}`);
      const all = rt.dispatchLabels(T, 3, 3);
      assert.ok(all.some((l) => l.endsWith(':lora2')) && !all.some((l) => l.endsWith(':lora2:tile')), `on: ${all}`);
    } finally {
      rt.productBlocks = true;
    }
  });

  it('gives the same logits, bit for bit, as the tiling passes: a prefill of three sequences (padded rows) and decode steps', async () => {
    await sameBitsOffAndOn(be, 4, async () => {
      const prefill = await be.run([0, 1, 2].map((slot) => ({ slot, tokens, output: 'all' as const })));
      const steps = await be.run([0, 1, 2, 3].map((slot) => ({ slot, tokens: [tokens[slot]], output: 'last' as const })));
      return [...prefill, ...steps];
    });
  });

  it('split products store the blocks in their reduction pass, rows padded: the same logits bit for bit', async () => {
    // C = 512: at 72 rows the FFN key and the first LoRA stages split K in two, so their reduction passes write the
    // next product's blocks (and zeros for rows 72–127).
    const model = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 512, headSize: 64, vocabSize: 64, seed: 7 });
    const split = await createBackend({ model, slots: 3, precision: 'f16', gpu, maxTokens: 128 });
    try {
      const rt = split as unknown as Rwkv7Runtime;
      const labels = rt.dispatchLabels(72, 3, 3);
      for (const p of ['fk', 'lora1']) assert.ok(labels.some((l) => new RegExp(`s2:${p}:reduce$`).test(l)), `${p} split: ${labels}`);
      assert.ok(!labels.some((l) => /:(fv|lora2):tile$/.test(l)), `${labels}`);
      const seq = Array.from({ length: 24 }, (_, i) => (i * 7) % 64);
      await sameBitsOffAndOn(split, 3, () => split.run([0, 1, 2].map((slot) => ({ slot, tokens: seq, output: 'all' as const }))));
    } finally {
      split.dispose();
    }
  });

  for (const name of ['v7a-tiny', 'v7b-tiny']) {
    it(`${name} (deep embeddings${name === 'v7b-tiny' ? ', DEA' : ''}): the same logits bit for bit, its FFN value keeping its pass`, async function () {
      requireGolden(this, path.join(GOLDEN, `${name}.pth`));
      const other = await createBackend({ model: path.join(GOLDEN, `${name}.pth`), slots: 3, precision: 'f16', gpu });
      try {
        const rt = other as unknown as Rwkv7Runtime;
        // Its gate rewrites the FFN key's rows before the value reads them: the key cannot write the value's blocks.
        assert.ok(rt.dispatchLabels(72, 3, 3).some((l) => l.endsWith(':fv:tile')));
        const seq = Array.from({ length: 24 }, (_, i) => ((i * 13) % 200) + 1);
        await sameBitsOffAndOn(other, 3, () => other.run([0, 1, 2].map((slot) => ({ slot, tokens: seq, output: 'all' as const }))));
      } finally {
        other.dispose();
      }
    });
  }

  // Fused decode steps: 64 jobs (the tiles' first row count and fusion's last), and 40 jobs with the tiles forced from
  // one row, so the fused kernel writes the padded rows 40–63 as zeros.
  for (const [jobs, env] of [[64, {}], [40, { RWKV_MATMUL_TILED: '2x2x2x2@1' }]] as const) {
    it(`a fused decode step of ${jobs} jobs${jobs < 64 ? ' (tiles forced, rows padded to 64)' : ''}: no tiling pass left, the same logits bit for bit`, async function () {
      const was = process.env.RWKV_MATMUL_TILED;
      Object.assign(process.env, env);
      let wide: Backend;
      try {
        wide = await createBackend({ model: path.join(GOLDEN, 'v7-tiny.pth'), slots: jobs, precision: 'f16', gpu });
      } finally {
        if (was === undefined) delete process.env.RWKV_MATMUL_TILED;
        else process.env.RWKV_MATMUL_TILED = was;
      }
      try {
        const rt = wide as unknown as Rwkv7Runtime;
        const labels = rt.dispatchLabels(jobs, jobs, jobs);
        assert.ok(labels.includes('rwkv7_tmix_decode') && labels.some((l) => l.startsWith('mm_sgtile') && l.endsWith(':o')), `${labels}`);
        // Only the head's pass is left (its rows come from the final norm's gather, which does not write blocks).
        if (gpu.device.limits.maxStorageBuffersPerShaderStage > 8) assert.deepStrictEqual(labels.filter((l) => l.endsWith(':tile')), ['mm_sgtile2x2x2x2:head:tile']);
        await sameBitsOffAndOn(wide, jobs, async () => {
          await wide.run(Array.from({ length: jobs }, (_, slot) => ({ slot, tokens: tokens.slice(0, 1 + (slot % 5)), output: 'none' as const })));
          return wide.run(Array.from({ length: jobs }, (_, slot) => ({ slot, tokens: [tokens[slot % tokens.length]], output: 'last' as const })));
        });
      } finally {
        wide.dispose();
      }
    });
  }
});
