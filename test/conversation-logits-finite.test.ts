// A conversation file's logits are sampled from as they are (a generation with an empty prompt starts from them),
// so a forged file with NaN or ±Infinity logits is refused at load, naming the problem, as its state is.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { RwkvEngine } from '../engine/engine';
import { byteTokenizer, FakeBackend } from './fake-backend';
const { decode, encode } = require('cbor-x') as { decode(b: Uint8Array): unknown; encode(v: unknown): Uint8Array };

describe('conversation files: logits must be finite', () => {
  let dir: string;
  let engine: RwkvEngine;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conv-logits-'));
    engine = new RwkvEngine({ backend: new FakeBackend({ slots: 1 }), tokenizer: byteTokenizer, config: { stateDir: dir }, compileConstraint: null });
  });
  after(async () => {
    await engine.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const bad of [NaN, Infinity, -Infinity]) {
    it(`a file whose logits hold ${bad} is refused and nothing is loaded`, async () => {
      await engine.saveConversation('hello there', 'c.cbor');
      const file = decode(fs.readFileSync(path.join(dir, 'c.cbor'))) as { logits: Float32Array };
      const intact = encode(file);
      file.logits[7] = bad;
      await assert.rejects(engine.loadState('forged', encode(file)), /buffer: logits hold non-finite values/);
      assert.ok(!engine.listStates().some((s) => s.name === 'forged'));
      // The same file with its logits intact loads.
      assert.equal((await engine.loadState('intact', intact)).name, 'intact');
    });
  }
});
