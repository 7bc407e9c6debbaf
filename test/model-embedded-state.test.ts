// A state-tuned model merged into one file embeds `blocks.N.att.time_state`: the model loads, and that state is
// its default initial state (what a request without a named state starts from), the same state a separate
// state-tuning file with those tensors gives.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { RwkvEngine } from '../engine/engine';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { writeSafetensors } from '../engine/loader/safetensors';
import { describeModel } from '../engine/model-spec';
import { WorldTokenizer } from '../engine/tokenizer';
import type { Checkpoint, RawTensor } from '../engine/types';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';

/** A tuned-looking time_state per layer: [H, N, N] f32, seeded. */
function timeStates(nLayer: number, H: number, N: number, seed = 7): RawTensor[] {
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5);
  const out: RawTensor[] = [];
  for (let l = 0; l < nLayer; l++) {
    const v = Float32Array.from({ length: H * N * N }, () => rand());
    out.push({ name: `blocks.${l}.att.time_state`, dtype: 'f32', shape: [H, N, N], bytes: new Uint8Array(v.buffer) });
  }
  return out;
}

function withTensors(ck: Checkpoint, extra: RawTensor[]): Checkpoint {
  const tensors = new Map(ck.tensors);
  for (const t of extra) tensors.set(t.name, t);
  return { ...ck, tensors };
}

describe('embedded time_state (state-tuned merged models)', function () {
  this.timeout(300000);
  const model = path.join(GOLDEN, 'v7-tiny.pth');
  const tokenizer = WorldTokenizer.bundled().restrict(Array.from({ length: 511 }, (_, i) => i + 1));
  const backends: Backend[] = [];
  let dir = '';
  before(function () {
    requireGolden(this, model);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'embedded-state-'));
  });
  after(() => {
    backends.forEach((b) => b.dispose());
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is accepted by describeModel with its exact shape, in all layers or none', () => {
    const base = loadCheckpoint(model);
    const info = describeModel(base);
    const states = timeStates(info.nLayer, info.nHead, info.headSize);
    assert.deepStrictEqual(describeModel(withTensors(base, states)), info);
    assert.throws(() => describeModel(withTensors(base, states.slice(0, 2))), /missing tensor blocks\.2\.att\.time_state.*all or none/);
    const bad = { ...states[1], shape: [info.nHead, info.headSize * info.headSize] };
    assert.throws(() => describeModel(withTensors(base, [states[0], bad, states[2]])), /blocks\.1\.att\.time_state: wrong shape: expected \[2, 64, 64\]/);
  });

  it('is the default initial state: equal to the same time_state loaded as a state file, unlike the zero state', async () => {
    const base = loadCheckpoint(model);
    const info = describeModel(base);
    const states = timeStates(info.nLayer, info.nHead, info.headSize);
    const stateFile = path.join(dir, 'tuned.st');
    writeSafetensors(stateFile, states);
    const engineOf = async (ck: Checkpoint) => {
      const backend = await createBackend({ model: ck, slots: 1, precision: 'f32', device: 'cpu', threads: 1 });
      backends.push(backend);
      return new RwkvEngine({ backend, tokenizer, compileConstraint: null });
    };
    const merged = await engineOf(withTensors(base, states));
    const plain = await engineOf(base);
    await plain.loadState('tuned', fs.readFileSync(stateFile));
    const text = 'Hello there, state';
    const fromDefault = await merged.embed(text);
    assert.deepStrictEqual(fromDefault, await plain.embed(text, { state: 'tuned' }));
    assert.notDeepStrictEqual(fromDefault, await plain.embed(text));
    // A named state still replaces the default.
    await merged.loadState('tuned', fs.readFileSync(stateFile));
    assert.deepStrictEqual(await merged.embed(text, { state: 'tuned' }), fromDefault);
    await Promise.all([merged.close(), plain.close()]);
  });

  it('both backends take it (RWKV-6 and RWKV-7), the same state', async () => {
    const states = new Map<string, Float32Array | null | undefined>();
    for (const [name, device] of [['v7-tiny', 'cpu'], ['v7-tiny', 'gpu'], ['v6-tiny', 'cpu'], ['v6-tiny', 'gpu']] as const) {
      const base = loadCheckpoint(path.join(GOLDEN, `${name}.pth`));
      const info = describeModel(base);
      const backend = await createBackend({ model: withTensors(base, timeStates(info.nLayer, info.nHead, info.headSize)), slots: 1, precision: 'f32', device });
      backends.push(backend);
      assert.strictEqual(backend.defaultState?.length, backend.stateSize, `${name} on ${device}`);
      states.set(`${name}/${device}`, backend.defaultState);
    }
    assert.deepStrictEqual(states.get('v7-tiny/gpu'), states.get('v7-tiny/cpu'));
    assert.deepStrictEqual(states.get('v6-tiny/gpu'), states.get('v6-tiny/cpu'));
  });
});
