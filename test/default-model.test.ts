// The bundled default model (models/default.st, trained by train/train.py) on the WebGPU engine:
// its layout and vocabulary map, and its logits against the PyTorch reference RNN's logits for the
// same tokens, stored by the training run in test/fixtures/default-model.expected.st.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { createBackend, Backend } from '../engine/backend';
import { acquireGpu, GpuContext } from '../engine/gpu/device';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import { describeModel } from '../engine/model-spec';
import { WorldTokenizer } from '../engine/tokenizer';
import type { Checkpoint, ModelInfo } from '../engine/types';
import { REPO_ROOT } from './paths';
import { worstRelL2 } from './metrics';

const MODEL = path.join(REPO_ROOT, 'models', 'default.st');
const EXPECTED = path.join(REPO_ROOT, 'test', 'fixtures', 'default-model.expected.st');

/** Mean negative log-likelihood (nats) of tokens[t+1] under logits row t. */
function meanNll(logits: Float32Array, tokens: number[], vocab: number): number {
  let total = 0;
  for (let t = 0; t + 1 < tokens.length; t++) {
    const row = logits.subarray(t * vocab, (t + 1) * vocab);
    let max = -Infinity;
    for (const v of row) max = Math.max(max, v);
    let sum = 0;
    for (const v of row) sum += Math.exp(v - max);
    total += max + Math.log(sum) - row[tokens[t + 1]];
  }
  return total / (tokens.length - 1);
}

describe('default model: models/default.st', function () {
  this.timeout(600_000);
  let ck: Checkpoint;
  let info: ModelInfo;
  let expected: Checkpoint;
  let tokens: number[];
  let logits: Float32Array;

  before(() => {
    ck = readSafetensors(MODEL);
    info = describeModel(ck);
    expected = readSafetensors(EXPECTED);
    tokens = Array.from(toI32(expected.tensors.get('tokens')!));
    logits = Float32Array.from(toF32(expected.tensors.get('logits')!));
  });

  it('is an RWKV-7 model of f16 weights within 40 MB, with a reduced World vocabulary', () => {
    assert.equal(info.version, 'v7');
    assert.equal(info.headSize, 64);
    assert.ok(fs.statSync(MODEL).size <= 40e6, `${MODEL} is ${fs.statSync(MODEL).size} bytes`);
    for (const [name, t] of ck.tensors) if (name !== 'vocab_map') assert.equal(t.dtype, 'f16', name);
    const map = info.vocabMap;
    assert.ok(map, 'vocab_map missing');
    assert.equal(map.length, info.vocabSize);
    assert.equal(map[0], 0, 'row 0 must be World id 0 (end of text)');
    for (let i = 2; i < map.length; i++) assert.ok(map[i] > map[i - 1], 'vocab_map rows are in ascending World id order');
    assert.match(ck.metadata.name ?? '', /rwkv7/);
    assert.ok(ck.metadata.licence, 'licence metadata missing');
  });

  it('the restricted World tokenizer encodes the reference text to the reference rows', () => {
    const map = info.vocabMap!;
    const rowOf = new Map<number, number>();
    map.forEach((id, row) => rowOf.set(id, row));
    const tok = WorldTokenizer.bundled().restrict(map.subarray(1));
    const rows = tok.encode(expected.metadata.text).map((id) => rowOf.get(id)!);
    assert.deepEqual(rows, tokens);
  });

  for (const precision of ['f32', 'f16'] as const) {
    describe(`engine with ${precision} weights`, () => {
      let gpu: GpuContext;
      let be: Backend;
      before(async () => {
        gpu = await acquireGpu();
        be = await createBackend({ model: ck, slots: 1, precision, gpu });
      });
      after(() => be?.dispose());

      it('logits of every step match the PyTorch reference, and the state after the text', async () => {
        be.resetState(0);
        const [out] = await be.run([{ slot: 0, tokens, output: 'all' }]);
        const tol = precision === 'f32' ? 1e-3 : 5e-3;
        const err = worstRelL2(out!, logits, info.vocabSize);
        assert.ok(err < tol, `rel L2 of logits ${err} >= ${tol}`);
        const state = await be.readState(0);
        const { nLayer, nEmbd: C, nHead: H, headSize: N } = info;
        const stride = 2 * C + H * N * N;
        for (let l = 0; l < nLayer; l++) {
          const want = Float32Array.from(toF32(expected.tensors.get(`state.${l}.att_kv`)!));
          const got = state.subarray(l * stride + C, l * stride + C + H * N * N);
          const e = worstRelL2(got, want, want.length);
          assert.ok(e < tol, `state.${l}.att_kv: rel L2 ${e} >= ${tol}`);
        }
      });

      it('has learned language: the reference text costs far less than a uniform guess', async () => {
        be.resetState(0);
        const [out] = await be.run([{ slot: 0, tokens, output: 'all' }]);
        const nll = meanNll(out!, tokens, info.vocabSize);
        const uniform = Math.log(info.vocabSize);
        assert.ok(nll < 0.6 * uniform, `mean NLL ${nll.toFixed(3)} nats is not well below uniform ${uniform.toFixed(3)}`);
      });
    });
  }
});
