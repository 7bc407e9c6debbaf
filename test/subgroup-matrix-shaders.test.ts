// The subgroup-matrix kernels compiled where CI has no such GPU: Dawn's null backend offers
// chromium-experimental-subgroup-matrix (with allow_unsafe_apis) and runs Tint's full validation, though it executes
// nothing. Lavapipe has no subgroup matrices, so before this the GPU-only path was first compiled on the H200.
// Checked: the engine's f16 and int8 steps (prefill and decode) make no invalid pipeline and no shader warning (Dawn
// printed a deprecation warning for every subgroupMatrixLoad/Store into users' logs before the current form), every
// tiled, split and staged product variant compiles clean, and staged tiles too large for a device's workgroup
// memory are not chosen (matmul.ts stagedWithin: the null device has WebGPU's default 16,384 bytes). A kernel binding
// more storage buffers than the device allows is refused by name (gpu/kernel.ts makeKernel: the null device has 8).

import * as assert from 'assert';
import { createBackend } from '../engine/backend';
import { engineLimits, type GpuContext } from '../engine/gpu/device';
import { shaderSource } from '../engine/gpu/shader-source';
import { DEFAULT_STAGED, matmulShader, stagedWithin, stagedWorkgroupBytes, type MatmulVariant } from '../engine/rwkv7/matmul';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { wkvPasses, wkvUnsupported, wkvVariantName, wkvVariants } from '../engine/rwkv7/wkv';

const SUBGROUP_MATRIX = 'chromium-experimental-subgroup-matrix';

interface NullDevice {
  ctx: GpuContext;
  modules: [string | undefined, GPUShaderModule][];
  uncaptured: string[];
}

let instance: GPU | null = null;

/** A device of Dawn's null backend with subgroup matrices, as the engine's GPU context; null where Dawn has none. */
async function nullDevice(): Promise<NullDevice | null> {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const dawn = require('webgpu') as { create: (flags: string[]) => GPU; globals: Record<string, unknown> };
  for (const [k, v] of Object.entries(dawn.globals)) if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
  // Kept referenced for the whole run: a collected Dawn instance takes its devices down with it (a crash).
  instance = dawn.create(['backend=null', 'enable-dawn-features=allow_unsafe_apis']);
  const adapter = await instance.requestAdapter();
  if (!adapter || !adapter.features.has(SUBGROUP_MATRIX)) return null;
  const features = ['shader-f16', 'subgroups', SUBGROUP_MATRIX].filter((f) => adapter.features.has(f)) as GPUFeatureName[];
  const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: engineLimits(adapter.limits) });
  const modules: NullDevice['modules'] = [];
  const create = device.createShaderModule.bind(device);
  device.createShaderModule = (d: GPUShaderModuleDescriptor) => {
    const m = create(d);
    modules.push([d.label, m]);
    return m;
  };
  const uncaptured: string[] = [];
  device.onuncapturederror = (e) => uncaptured.push((e as GPUUncapturedErrorEvent).error.message.split('\n')[0]);
  // The H200's path: 32-lane subgroups (the null adapter reports 4..128; the kernels assume 32, as on NVIDIA).
  const ctx: GpuContext = {
    device, adapterName: 'Dawn null backend', features: new Set(features), lostReason: null, subgroup32: true, subgroupSize: 32,
    kernelPath: 'subgroup-matrix', dawnToggles: ['allow_unsafe_apis'], error: null, watchers: new Set(), released: false,
  };
  return { ctx, modules, uncaptured };
}

/** Every warning and error Tint reported for the modules made so far, with the module's label. */
async function shaderMessages(modules: NullDevice['modules']): Promise<string[]> {
  const out: string[] = [];
  for (const [label, m] of modules) {
    for (const msg of (await m.getCompilationInfo()).messages) {
      if (msg.type !== 'info') out.push(`${label}: ${msg.type} ${msg.lineNum}:${msg.linePos} ${msg.message}`);
    }
  }
  return out;
}

describe('subgroup-matrix shaders on Dawn\'s null backend', function () {
  this.timeout(300_000);
  let nd: NullDevice | null = null;
  before(async function () {
    nd = await nullDevice();
    if (!nd) this.skip();
  });
  after(() => nd?.ctx.device.destroy());

  const cases = [['v7', 'f16'], ['v7', 'int8'], ['v7a', 'f16']] as const;
  for (const [variant, precision] of cases) {
    it(`${variant} ${precision}: a prefill and decode steps of every batch size make valid pipelines with no shader warning`, async () => {
      const { ctx, modules, uncaptured } = nd!;
      const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, dtype: 'f16', seed: 3, variant });
      // RWKV-7b's cached rows: a short context, so 64 slots of them fit the null device's binding limit.
      const be = await createBackend({ model: ck, slots: 64, precision, maxTokens: 512, maxRows: 64, maxContext: 1024, gpu: ctx, device: 'gpu' });
      try {
        assert.match(be.kernelPath, /subgroup-matrix path/);
        // The null device computes nothing: the results are not read, only the pipelines and commands checked.
        for (const len of [512, 200, 64]) await be.run([{ slot: 0, tokens: Array.from({ length: len }, (_, i) => i % 300), output: 'last' }]);
        for (const b of [1, 8, 32, 64]) await be.run(Array.from({ length: b }, (_, s) => ({ slot: s, tokens: [5], output: 'last' as const })));
      } finally {
        be.dispose();
      }
      assert.deepStrictEqual(uncaptured, []);
      assert.ok(modules.length > 20, `${modules.length} shader modules`);
      assert.deepStrictEqual(await shaderMessages(modules), []);
    });
  }

  it('v7b on a device of 8 storage buffers a stage: its first step is refused naming the kernel, nothing breaks the device', async () => {
    const { ctx, uncaptured } = nd!;
    assert.strictEqual(ctx.device.limits.maxStorageBuffersPerShaderStage, 8);
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, dtype: 'f16', seed: 3, variant: 'v7b' });
    const be = await createBackend({ model: ck, slots: 8, precision: 'f16', maxTokens: 512, maxRows: 64, maxContext: 1024, gpu: ctx, device: 'gpu' });
    try {
      await assert.rejects(
        be.run([{ slot: 0, tokens: [1, 2, 3], output: 'last' }]),
        /kernel rwkv7b_dea_rows\(.*\) binds 9 storage buffers, more than this GPU allows in a shader stage \(8\); run this model on the CPU backend/,
      );
    } finally {
      be.dispose();
    }
    assert.deepStrictEqual(uncaptured, []);
  });

  it('every tiled, split and staged product variant compiles with no warning', async () => {
    const { ctx } = nd!;
    const variants: MatmulVariant[] = [];
    for (const [mt, nt, sgm, sgn] of [[2, 2, 2, 2], [4, 2, 1, 2], [4, 1, 1, 4], [4, 4, 1, 1], [2, 4, 2, 1]] as const) {
      for (const split of [1, 2, 8]) for (const ku of [1, 2, 4] as const) variants.push({ kind: 'sgtile', mt, nt, sgm, sgn, split, ku });
    }
    for (const split of [1, 8]) variants.push({ kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64, split }, { kind: 'sgmat', mt: 4, nt: 1, sgs: 4, kc: 64, split });
    const staged = [DEFAULT_STAGED.large.variant, DEFAULT_STAGED.small.variant];
    const modules: NullDevice['modules'] = [];
    for (const layout of ['blocks', 'input-blocks', 'rows'] as const) {
      for (const v of variants) {
        const s = matmulShader(v, { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, layout });
        modules.push([s.key, ctx.device.createShaderModule({ label: s.key, code: shaderSource(s.parts, { ...s.constants, C: 128, N: 64, TMAX: 512, STATE: 4096 }) })]);
      }
    }
    for (const precision of ['f16', 'int8'] as const) {
      for (const v of staged) {
        const s = matmulShader({ ...v, split: 2 }, { kernelPath: 'subgroup-matrix', precision, subgroup32: true, layout: 'rows' });
        modules.push([s.key, ctx.device.createShaderModule({ label: s.key, code: shaderSource(s.parts, { ...s.constants, C: 128, N: 64, TMAX: 512, STATE: 4096 }) })]);
      }
    }
    assert.deepStrictEqual(await shaderMessages(modules), []);
  });

  it('every WKV variant in the form a GPU runs (the lane variants\' straight-line scan at head size 64) compiles with no warning', async () => {
    // CI's lavapipe runs the lane scan as loops (wkv-chunk.ts chunkScanCode says why): here the straight-line form at
    // the official head size goes through Tint, as it would on the H200.
    const { ctx } = nd!;
    const modules: NullDevice['modules'] = [];
    const c = { C: 2048, N: 64, TMAX: 512, STATE: 2 * 2048 + 32 * 64 * 64 };
    const h200 = { headSize: 64, subgroupMinSize: 32, maxWorkgroupStorage: 49152, maxInvocations: 1024, cpuDriver: false };
    for (const v of wkvVariants().filter((w) => wkvUnsupported(w, h200) === null)) {
      wkvPasses(v, c, true).forEach((p, i) => {
        const label = `${wkvVariantName(v)}:${i}`;
        modules.push([label, ctx.device.createShaderModule({ label, code: shaderSource(p.parts, p.constants) })]);
      });
    }
    assert.ok(modules.some(([l]) => l === 'chunk32-lane:1'));
    assert.deepStrictEqual(await shaderMessages(modules), []);
  });
});

describe('staged tiles and the device\'s workgroup memory (matmul.ts stagedWithin)', () => {
  it('counts what mm_sgstage.wgsl declares, and keeps only the tiles that fit', () => {
    // xs and ws: 16·MT·SGM and 16·NT·SGN rows of KC + 8 halves; ot: 256 floats a subgroup.
    assert.strictEqual(stagedWorkgroupBytes(DEFAULT_STAGED.small.variant), 2 * 64 * 40 + 2 * 64 * 40 + 4 * 8 * 256);
    assert.strictEqual(stagedWorkgroupBytes(DEFAULT_STAGED.small.variant), 18432);
    assert.strictEqual(stagedWorkgroupBytes(DEFAULT_STAGED.large.variant), 22528);
    assert.strictEqual(stagedWithin(DEFAULT_STAGED, 32768), DEFAULT_STAGED);
    assert.deepStrictEqual(stagedWithin(DEFAULT_STAGED, 20000), { large: DEFAULT_STAGED.small, small: DEFAULT_STAGED.small });
    assert.strictEqual(stagedWithin(DEFAULT_STAGED, 16384), null);
    assert.strictEqual(stagedWithin(null, 65536), null);
  });
});
