// LoRA merged at load (engine/lora.ts): the merge equals merging the weights by hand, through the engine
// config too, and LoRA files stay inside the model's folder.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { RwkvEngine } from '../engine/engine';
import { checkEngineConfig } from '../engine/engine-config';
import { createEngine } from '../engine/engine-factory';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { toF32 } from '../engine/loader/dtype';
import { writeSafetensors } from '../engine/loader/safetensors';
import { mergeLora, resolveLoraFiles } from '../engine/lora';
import { WorldTokenizer } from '../engine/tokenizer';
import type { Checkpoint, RawTensor } from '../engine/types';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

function f32Tensor(name: string, shape: number[], seed: number, scale = 0.05): RawTensor {
  let s = seed;
  const n = shape.reduce((a, b) => a * b, 1);
  const v = Float32Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * scale);
  return { name, dtype: 'f32', shape, bytes: new Uint8Array(v.buffer) };
}

/** W + scale · B·A, computed here in float64, one entry at a time. */
function byHand(w: RawTensor, b: RawTensor, a: RawTensor, scale: number): Float32Array {
  const [out, inp] = w.shape;
  const r = a.shape[0];
  const W = toF32(w);
  const B = toF32(b);
  const A = toF32(a);
  const res = new Float32Array(out * inp);
  for (let o = 0; o < out; o++)
    for (let i = 0; i < inp; i++) {
      let d = 0;
      for (let k = 0; k < r; k++) d += B[o * r + k] * A[k * inp + i];
      res[o * inp + i] = W[o * inp + i] + scale * d;
    }
  return res;
}

function assertClose(actual: Float32Array, expected: Float32Array, tol: number, what: string): void {
  assert.strictEqual(actual.length, expected.length, what);
  for (let i = 0; i < actual.length; i++) {
    if (Math.abs(actual[i] - expected[i]) > tol * (1 + Math.abs(expected[i]))) assert.fail(`${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

describe('LoRA merge at load', function () {
  this.timeout(300000);
  const golden = path.join(GOLDEN, 'v7-tiny.st');
  const tokenizer = WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));
  const alpha = 8;
  const rank = 4;
  let dir = '';
  let modelFile = '';
  let lora: RawTensor[] = [];
  const backends: Backend[] = [];

  before(function () {
    requireGolden(this, golden);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lora-'));
    fs.mkdirSync(path.join(dir, 'models'));
    modelFile = path.join(dir, 'models', 'model.st');
    fs.copyFileSync(golden, modelFile);
    lora = [
      // RWKV-LM-LoRA / PEFT names on att.key; web-rwkv's lora.0 (B) / lora.1 (A) on ffn.value [128, 512].
      f32Tensor('blocks.0.att.key.weight.lora_A', [rank, 128], 1),
      f32Tensor('blocks.0.att.key.weight.lora_B', [128, rank], 2),
      f32Tensor('blocks.1.ffn.value.lora.1', [rank, 512], 3),
      f32Tensor('blocks.1.ffn.value.lora.0', [128, rank], 4),
      // A vector trained alongside: replaces the model's.
      f32Tensor('blocks.2.att.x_r', [1, 1, 128], 5, 1),
    ];
    writeSafetensors(path.join(dir, 'models', 'adapter.st'), lora);
  });
  after(() => {
    backends.forEach((b) => b.dispose());
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const handMerged = (base: Checkpoint): Checkpoint => {
    const t = new Map(base.tensors);
    const key = base.tensors.get('blocks.0.att.key.weight')!;
    const val = base.tensors.get('blocks.1.ffn.value.weight')!;
    const put = (w: RawTensor, v: Float32Array) => t.set(w.name, { name: w.name, dtype: 'f32', shape: w.shape, bytes: new Uint8Array(v.buffer) });
    put(key, byHand(key, lora[1], lora[0], alpha / rank));
    put(val, byHand(val, lora[3], lora[2], alpha / rank));
    t.set('blocks.2.att.x_r', lora[4]);
    return { ...base, tensors: t };
  };

  it('mergeLora equals merging the weights by hand (both layouts, and a replaced vector)', () => {
    const base = loadCheckpoint(modelFile);
    const merged = mergeLora(base, { format: 'memory', tensors: new Map(lora.map((t) => [t.name, t])), metadata: {} }, alpha, 'adapter');
    const hand = handMerged(base);
    for (const name of ['blocks.0.att.key.weight', 'blocks.1.ffn.value.weight', 'blocks.2.att.x_r']) {
      assertClose(toF32(merged.tensors.get(name)!), toF32(hand.tensors.get(name)!), 1e-6, name);
    }
    // Everything else untouched, and the base checkpoint unchanged.
    assert.strictEqual(merged.tensors.get('blocks.0.att.value.weight'), base.tensors.get('blocks.0.att.value.weight'));
    assert.notStrictEqual(base.tensors.get('blocks.2.att.x_r'), lora[4]);
  });

  it('the engine config `lora` merges the file at load: same outputs as the hand-merged model', async () => {
    const config = { modelPath: modelFile, lora: [{ path: 'adapter.st', alpha }], device: 'cpu' as const, precision: 'f32' as const, maxBatch: 1 };
    const withLora = await createEngine(config);
    const backend = await createBackend({ model: handMerged(loadCheckpoint(modelFile)), slots: 1, precision: 'f32', device: 'cpu' });
    backends.push(backend);
    const hand = new RwkvEngine({ backend, tokenizer, compileConstraint: null });
    const plain = await createEngine({ ...config, lora: undefined });
    const text = 'Hello there, adapter';
    const got = await withLora.embed(text);
    assertClose(got, await hand.embed(text), 1e-4, 'embedding');
    assert.notDeepStrictEqual(got, await plain.embed(text));
    await Promise.all([withLora.close(), hand.close(), plain.close()]);
  });

  it('LoRA files stay inside the model folder and must fit the model', async () => {
    assert.throws(() => checkEngineConfig({ lora: [{ path: '../adapter.st', alpha: 1 }] }), /lora\[0\]\.path must be a path relative/);
    assert.throws(() => checkEngineConfig({ lora: [{ path: '/etc/passwd', alpha: 1 }] }), /lora\[0\]\.path/);
    assert.throws(() => checkEngineConfig({ lora: [{ path: 'a.st', alpha: NaN }] }), /lora\[0\]\.alpha must be a finite number/);
    fs.writeFileSync(path.join(dir, 'outside.st'), 'x');
    fs.symlinkSync(path.join(dir, 'outside.st'), path.join(dir, 'models', 'link.st'));
    await assert.rejects(resolveLoraFiles([{ path: 'link.st', alpha: 1 }], modelFile), /LoRA file "link.st": not found in the model's folder/);
    await assert.rejects(resolveLoraFiles([{ path: 'missing.st', alpha: 1 }], modelFile), /LoRA file "missing.st": not found/);
    const big = path.join(dir, 'models', 'big.st');
    fs.writeFileSync(big, '');
    fs.truncateSync(big, fs.statSync(modelFile).size + 32 * 1024 * 1024);
    await assert.rejects(resolveLoraFiles([{ path: 'big.st', alpha: 1 }], modelFile), /big\.st" is \d+ bytes, more than the model it adapts/);
    const ok = await resolveLoraFiles([{ path: 'adapter.st', alpha: 2 }], modelFile);
    assert.deepStrictEqual(ok, [{ file: fs.realpathSync(path.join(dir, 'models', 'adapter.st')), alpha: 2 }]);
    // A LoRA for another model is refused by name.
    const stray = { format: 'memory' as const, tensors: new Map([['blocks.9.att.key.weight', f32Tensor('blocks.9.att.key.weight', [2], 9)]]), metadata: {} };
    assert.throws(() => mergeLora(loadCheckpoint(modelFile), stray, 1, 'stray'), /LoRA stray: tensor blocks\.9\.att\.key\.weight is not a tensor of the model/);
  });
});
