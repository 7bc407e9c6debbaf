// A default initial state in the model configuration (issue #14 item 8): a state file in the state folder that
// requests naming no state start from, loaded when the engine starts and again when it is rebuilt.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { checkEngineConfig } from '../engine/engine-config';
import { createEngine } from '../engine/engine-factory';
import { parseModelConfig } from '../nodes/shared/model-config';

describe('default initial state (model configuration)', function () {
  let stateDir: string;
  before(() => (stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-default-state-'))));
  after(() => fs.rmSync(stateDir, { recursive: true, force: true }));

  // The bundled tiny model on the CPU backend: one slot, small and quick.
  const base = () => ({ stateDir, device: 'cpu' as const, maxBatch: 1, precision: 'f32' as const });

  it('starts requests that name no state from it, at engine start and after a rebuild', async () => {
    const plain = await createEngine(base());
    await plain.saveConversation('User: you are a pirate. Answer like one.\n\nAssistant: Arr.', 'pirate.cbor');
    await plain.loadConversation('pirate.cbor', 'pirate');
    const fromNamed = await plain.embed('Where is the treasure?', { state: 'pirate' });
    const fromZero = await plain.embed('Where is the treasure?');
    assert.notDeepStrictEqual(fromNamed, fromZero);
    await plain.close();

    for (let build = 0; build < 2; build++) {
      const engine = await createEngine({ ...base(), defaultState: 'pirate.cbor' });
      assert.deepStrictEqual(await engine.embed('Where is the treasure?'), fromNamed, `build ${build}`);
      assert.deepStrictEqual(engine.listStates(), [], 'the default is no named state (it takes no place under maxStates)');
      await engine.close();
    }
  });

  it('refuses a default state outside the state folder, or missing, with an error naming it', async () => {
    await assert.rejects(createEngine({ ...base(), defaultState: '../outside.cbor' }), /default state of the model configuration cannot be loaded/);
    await assert.rejects(createEngine({ ...base(), defaultState: 'missing.cbor' }), /default state of the model configuration cannot be loaded/);
    assert.throws(() => checkEngineConfig({ defaultState: '' }), /defaultState must be a non-empty path/);
    assert.throws(() => checkEngineConfig({ defaultState: 7 as unknown as string }), /defaultState must be a non-empty path/);
  });

  it('is a field of the model configuration both hosts share (a name inside the state folder)', () => {
    assert.deepStrictEqual(parseModelConfig({ stateDir: 'states', defaultState: 'tuned/chat.st' }, '/home/u'), {
      stateDir: path.resolve('/home/u', 'states'),
      defaultState: 'tuned/chat.st',
    });
  });
});
