// Saving a conversation does not copy its state on the event loop: the snapshot read from the backend goes to the
// file as it is (the encoder writes the CBOR headers around the arrays' own memory, and the file is written from
// those parts off the event loop), so a 7b state of hundreds of MiB costs no synchronous copy. Before, cbor-x
// encoded the state into one new buffer. The file it writes loads back to the same state.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { RwkvEngine } from '../engine/engine';
import { StateFolder } from '../engine/state-folder';
import { byteTokenizer } from './fake-backend';
import { GrowingFakeBackend, ROW_FLOATS } from './growing-fake-backend';

/** Remembers the snapshots it hands out. */
class RecordingBackend extends GrowingFakeBackend {
  readonly snapshots: Float32Array[] = [];
  override async readState(slot: number, opts?: { fixedOnly?: boolean }): Promise<Float32Array> {
    const s = await super.readState(slot, opts);
    for (let i = 0; i < s.length; i++) s[i] = (i % 1000) / 7;
    this.snapshots.push(s);
    return s;
  }
}

describe('saving a conversation copies no state on the event loop', () => {
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'save-parts-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the state file is written from the snapshot\'s own memory, and loads back to it', async () => {
    const backend = new RecordingBackend({ slots: 1, script: () => 1 }, 1 << 20);
    const engine = new RwkvEngine({ backend, tokenizer: byteTokenizer, config: { stateDir: dir }, compileConstraint: null });
    const written: unknown[] = [];
    const write = StateFolder.prototype.write;
    StateFolder.prototype.write = function (this: StateFolder, ...args: Parameters<typeof write>) {
      written.push(args[1]);
      return write.apply(this, args);
    };
    try {
      await engine.saveConversation('a prompt of some tokens', 'c.cbor');
      const snapshot = backend.snapshots[backend.snapshots.length - 1];
      assert.ok(snapshot.length > backend.stateSize + 20 * ROW_FLOATS);
      const given = written[0];
      const parts = Array.isArray(given) ? (given as Uint8Array[]) : [given as Uint8Array];
      assert.ok(
        parts.some((p) => p.buffer === snapshot.buffer && p.byteLength === snapshot.byteLength),
        `the file's bytes are ${parts.length} part(s), none of them the snapshot's memory`,
      );
      await engine.loadConversation('c.cbor', 'c');
      const loaded = (engine as unknown as { states: { resolve(n: string): { state: Float32Array } } }).states.resolve('c').state;
      assert.deepEqual(loaded, snapshot);
    } finally {
      StateFolder.prototype.write = write;
      await engine.close();
    }
  });
});
