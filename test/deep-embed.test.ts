// RWKV-7a (DeepEmbed) beyond the golden model's one shape (test/golden.test.ts checks both backends against the
// reference on v7a-tiny, n_embd 128): the WebGPU and CPU backends agree on a random 7a model of another shape
// (5 heads, a FFN wider than a workgroup, a vocabulary that is no power of two), and the CPU backend refuses
// DeepEmbed tables that cannot fit its memory before copying anything.

import { strict as assert } from 'assert';
import { createBackend } from '../engine/backend';
import { Arena } from '../engine/cpu/arena';
import { describeModel } from '../engine/model-spec';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { planRwkv7Cpu } from '../engine/rwkv7/cpu-weights';
import { worstRelL2 } from './metrics';

describe('RWKV-7a DeepEmbed', function () {
  this.timeout(300_000);

  it('a random 7a model is described as v7a, and its gate moves the logits', async () => {
    const opts = { nLayer: 2, nEmbd: 320, vocabSize: 1000, seed: 5 };
    const a = randomRwkv7Checkpoint({ ...opts, variant: 'v7a' });
    assert.equal(describeModel(a).version, 'v7a');
    // The same model with the gate made 1 (s2 = 0, s0 = 1).
    const neutral = randomRwkv7Checkpoint({ ...opts, variant: 'v7a' });
    for (let l = 0; l < opts.nLayer; l++) {
      for (const s of ['s2', 's0']) {
        const t = neutral.tensors.get(`blocks.${l}.ffn.${s}`)!;
        const f16 = new Uint16Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 2);
        f16.fill(s === 's0' ? 0x3c00 : 0); // s0 = 1, s2 = 0: the gate is 1
      }
    }
    const tokens = Array.from({ length: 9 }, (_, i) => (i * 131 + 7) % 1000);
    const logits = async (ck: typeof a) => {
      const be = await createBackend({ model: ck, slots: 1, device: 'cpu', threads: 1, precision: 'f32' });
      try {
        return (await be.run([{ slot: 0, tokens, output: 'all' }]))[0]!;
      } finally {
        be.dispose();
      }
    };
    const gated = await logits(a);
    const plain = await logits(neutral);
    assert.ok(worstRelL2(gated, plain, 1000) > 1e-2, 'the DeepEmbed gate changes nothing');
  });

  it('the WebGPU and CPU backends agree on a random 7a model (C 320, F 1280, V 1000), alone and batched', async () => {
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 320, vocabSize: 1000, seed: 9, variant: 'v7a', dtype: 'f32' });
    const tokens = Array.from({ length: 20 }, (_, i) => (i * 389 + 11) % 1000);
    const outs: Float32Array[] = [];
    for (const device of ['gpu', 'cpu'] as const) {
      const be = await createBackend({ model: ck, slots: 2, device, threads: 2, precision: 'f32', maxTokens: 8, maxRows: 8 });
      try {
        const [alone] = await be.run([{ slot: 0, tokens, output: 'all' }]);
        const [, batched] = await be.run([
          { slot: 0, tokens: tokens.slice(0, 3), output: 'last' },
          { slot: 1, tokens, output: 'all' },
        ]);
        assert.ok(worstRelL2(batched!, alone!, 1000) < 1e-5, `${device}: batched differs from alone`);
        outs.push(Float32Array.from(alone!));
      } finally {
        be.dispose();
      }
    }
    const err = worstRelL2(outs[0], outs[1], 1000);
    assert.ok(err < 1e-4, `GPU vs CPU rel L2 ${err}`);
  });

  it('the CPU backend refuses tables beyond its 4 GiB memory before reading a tensor, naming their size', async () => {
    const ck = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, vocabSize: 16, variant: 'v7a' });
    const info = { ...describeModel(ck), nLayer: 24, vocabSize: 65536 };
    // 24 × 65536 × 1024 × 4 bytes as f32; half that as f16 fits.
    await assert.rejects(
      planRwkv7Cpu(new Arena(), ck, info, { precision: 'f32', quantLayers: 0 }),
      /RWKV-7a DeepEmbed tables need 6442450944 bytes \(24 layers × 65536 tokens × 1024 × 4\), more than the CPU backend's 4 GiB of WebAssembly memory; try precision f16/,
    );
    await assert.rejects(planRwkv7Cpu(new Arena(), ck, info, { precision: 'f16', quantLayers: 0 }), /missing tensor blocks\.1\./);
  });
});
