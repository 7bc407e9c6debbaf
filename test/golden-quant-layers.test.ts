// Quantising the first N layers only (quantLayers, issue #15's "first N layers", ai00's `quant`) on the golden
// models (../shared/golden, 3 layers each): with N = 1 the logits' error against the reference sits between
// f16's and the fully quantised model's, the layers really are stored in different kinds (the uploaded groups
// on the GPU, the arena's matrices on the CPU), and the reported weight bytes are f16's less what exactly the
// quantised layers and the head save. GPU: RWKV-7 int8 and nf4, and RWKV-6 (whose upload differs) nf4 — its
// int8 error is mostly the f16 path's own 1.4e-2 on that model (golden.test.ts says why), too close to all
// layers' for a strict order. CPU: int8. Measured on lavapipe: v7 int8 4.1e-4 < 1.40e-2 < 1.93e-2, nf4
// 4.1e-4 < 1.82e-1 < 2.74e-1; v6 nf4 1.41e-2 < 4.71e-1 < 5.01e-1; CPU v7 int8 4.1e-4 < 1.45e-2 < 1.97e-2.
import { strict as assert } from 'assert';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import { describeModel } from '../engine/model-spec';
import { inQuantisedLayers, isQuantisedMatrix } from '../engine/quant/quantised-matrices';
import { NF4_BLOCK } from '../engine/quant/nf4-blocks';
import { uploadRwkv7 } from '../engine/rwkv7/weights';
import { uploadRwkv6 } from '../engine/rwkv6/weights';
import { planRwkv7Cpu } from '../engine/rwkv7/cpu-weights';
import { MATRIX_KIND } from '../engine/cpu/cpu-weight-writer';
import { Arena } from '../engine/cpu/arena';
import type { Precision, WeightStorage } from '../engine/precision';
import type { Checkpoint } from '../engine/types';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';
import { worstRelL2 } from './metrics';

type Quantised = 'int8' | 'nf4';

/** Logits of every token of the golden sequence, and their worst-row error against the reference. */
async function errorOf(be: Backend, tokens: number[], want: Float32Array, vocab: number): Promise<{ logits: Float32Array; err: number }> {
  const [all] = await be.run([{ slot: 0, tokens, output: 'all' }]);
  return { logits: all!, err: worstRelL2(all!, want, vocab) };
}

/** GPU bytes of the weights with the matrices `storage` quantises shrunk from f16 to their format. */
function expectedGpuBytes(ck: Checkpoint, f16Bytes: number, storage: WeightStorage & { precision: Quantised }): number {
  let bytes = f16Bytes;
  for (const [name, t] of ck.tensors) {
    if (!isQuantisedMatrix(name) || !inQuantisedLayers(name, storage)) continue;
    const [n, k] = t.shape;
    // Every matrix of these models is whole nf4 blocks, so a group's blocks are its matrices' blocks.
    bytes -= 2 * n * k;
    bytes += storage.precision === 'int8' ? n * k + 2 * n : (n * k) / 2 + (2 * n * k) / NF4_BLOCK;
  }
  return bytes;
}

describe('golden: quantising the first N layers (quantLayers)', function () {
  this.timeout(600_000);
  const load = (name: string) => {
    const ck = loadCheckpoint(path.join(GOLDEN, `${name}.st`));
    const g = readSafetensors(path.join(GOLDEN, `${name}.golden.st`));
    const tokens = Array.from(toI32(g.tensors.get('tokens')!));
    const want = Float32Array.from(toF32(g.tensors.get('logits')!));
    return { ck, tokens, want, vocab: want.length / tokens.length };
  };

  describe('[gpu]', () => {
    let gpu: GpuContext;
    before(async function () {
      requireGolden(this, ...['v7-tiny', 'v6-tiny'].flatMap((m) => [path.join(GOLDEN, `${m}.st`), path.join(GOLDEN, `${m}.golden.st`)]));
      gpu = await acquireGpu();
    });
    after(() => gpu && releaseGpu(gpu));

    for (const [model, formats] of [['v7-tiny', ['int8', 'nf4']], ['v6-tiny', ['nf4']]] as const) {
      for (const format of formats as readonly Quantised[]) {
        it(`${model} ${format}: layer 0 and the head quantised, layers 1-2 f16; error between f16's and all layers'; bytes exact`, async () => {
          const { ck, tokens, want, vocab } = load(model);
          const open = (precision: Precision, quantLayers?: number) => createBackend({ model: ck, slots: 1, precision, quantLayers, gpu, device: 'gpu' });
          const runs: Record<string, { err: number; bytes: number; kernels: string }> = {};
          for (const [label, precision, n] of [['f16', 'f16', undefined], ['first1', format, 1], ['all', format, 0]] as const) {
            const be = await open(precision, n);
            try {
              runs[label] = { err: (await errorOf(be, tokens, want, vocab)).err, bytes: be.weightBytes, kernels: be.kernelPath };
            } finally {
              be.dispose();
            }
          }
          console.log(`      ${model} ${format} vs reference: f16 ${runs.f16.err.toExponential(2)}, first layer ${runs.first1.err.toExponential(2)}, all layers ${runs.all.err.toExponential(2)}`);
          assert.ok(runs.f16.err < runs.first1.err && runs.first1.err < runs.all.err, JSON.stringify(runs));
          assert.equal(runs.first1.bytes, expectedGpuBytes(ck, runs.f16.bytes, { precision: format, quantLayers: 1 }));
          assert.equal(runs.all.bytes, expectedGpuBytes(ck, runs.f16.bytes, { precision: format, quantLayers: 0 }));
          assert.match(runs.first1.kernels, new RegExp(`${format} in layers 0-0 and the head, f16 in layers 1-2`));
          assert.doesNotMatch(runs.all.kernels, /f16 in layers/);
          // quantLayers = the layer count is every layer.
          const three = await open(format, 3);
          try {
            assert.equal(three.weightBytes, runs.all.bytes);
          } finally {
            three.dispose();
          }
        });
      }
    }

    it('the uploaded groups: the quantised format in layer 0 and the head, f16 after, LoRA and embedding f16 throughout', async () => {
      const { ck } = load('v7-tiny');
      const info = describeModel(ck);
      const w = await uploadRwkv7(gpu.device, ck, info, { precision: 'nf4', quantLayers: 1 });
      assert.deepEqual(w.layers.map((l) => [l.rkv.format, l.o.format, l.ffnK.format, l.ffnV.format, l.lora1.format]), [
        ['nf4', 'nf4', 'nf4', 'nf4', 'f16'],
        ['f16', 'f16', 'f16', 'f16', 'f16'],
        ['f16', 'f16', 'f16', 'f16', 'f16'],
      ]);
      assert.deepEqual([w.head.format, w.emb.format, w.quantLayers], ['nf4', 'f16', 1]);
      const v6 = load('v6-tiny').ck;
      const w6 = await uploadRwkv6(gpu.device, v6, describeModel(v6), { precision: 'int8', quantLayers: 2 });
      assert.deepEqual(w6.layers.map((l) => [l.rkvg.format, l.o.format, l.ffnKR.format, l.ffnV.format, l.ddlerp!.decayLora1.format]), [
        ['int8', 'int8', 'int8', 'int8', 'f16'],
        ['int8', 'int8', 'int8', 'int8', 'f16'],
        ['f16', 'f16', 'f16', 'f16', 'f16'],
      ]);
      assert.deepEqual([w6.common.head.format, w6.common.emb.format], ['int8', 'f16']);
    });
  });

  describe('CPU backend', () => {
    before(function () {
      requireGolden(this, path.join(GOLDEN, 'v7-tiny.st'), path.join(GOLDEN, 'v7-tiny.golden.st'));
    });

    it('v7-tiny int8: layer 0 and the head int8, layers 1-2 f16 (the matrices in the arena), error between, bytes between', async () => {
      const { ck, tokens, want, vocab } = load('v7-tiny');
      const runs: Record<string, { err: number; bytes: number; name: string }> = {};
      for (const [label, precision, n] of [['f16', 'f16', undefined], ['first1', 'int8', 1], ['all', 'int8', 0]] as const) {
        const be = await createBackend({ model: ck, slots: 1, precision, quantLayers: n, device: 'cpu', threads: 2 });
        try {
          runs[label] = { err: (await errorOf(be, tokens, want, vocab)).err, bytes: be.weightBytes, name: be.adapterName };
        } finally {
          be.dispose();
        }
      }
      console.log(`      CPU v7-tiny int8 vs reference: f16 ${runs.f16.err.toExponential(2)}, first layer ${runs.first1.err.toExponential(2)}, all layers ${runs.all.err.toExponential(2)}`);
      assert.ok(runs.f16.err < runs.first1.err && runs.first1.err < runs.all.err, JSON.stringify(runs));
      assert.ok(runs.all.bytes < runs.first1.bytes && runs.first1.bytes < runs.f16.bytes, JSON.stringify(runs));
      assert.match(runs.first1.name, /int8 weights \(int8 in layers 0-0 and the head, f16 in layers 1-2\)/);

      const plan = await planRwkv7Cpu(new Arena(), ck, describeModel(ck), { precision: 'int8', quantLayers: 1 });
      const kinds = plan.weights.layers.map((l) => [l.r.kind, l.k.kind, l.v.kind, l.o.kind, l.w1.kind, l.a2.kind, l.ffnK.kind, l.ffnV.kind]);
      const { int8, f16 } = MATRIX_KIND;
      assert.deepEqual(kinds, [Array(8).fill(int8), Array(8).fill(f16), Array(8).fill(f16)]);
      assert.equal(plan.weights.head.kind, int8);
      assert.equal(plan.weights.hasInt8, true);
      const none = await planRwkv7Cpu(new Arena(), ck, describeModel(ck), { precision: 'f16', quantLayers: 0 });
      assert.equal(none.weights.hasInt8, false);
    });
  });
});
