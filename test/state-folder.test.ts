// Every file a request names stays inside the state folder (engine/state-folder.ts): escapes by
// '..', absolute paths, '.', symlinked folders and files, FIFOs, devices and oversized files are refused,
// saves are atomic and never replace a file that is not a conversation file, missing and refused files
// answer alike, n8n's file access policy applies, and Node-RED msg paths stay relative.
// Engine-level tests run on the fake backend; node-level ones on the fake engine.

import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { EngineConfig } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { stateSourceBound } from '../engine/state-file';
import { releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import { RwkvLoadState } from '../nodes/RwkvLoadState/RwkvLoadState.node';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { byteTokenizer, FakeBackend } from './fake-backend';
import { FakeEngineProvider } from './nodes-fake-engine';
import { executeContext } from './nodes-n8n-context';
import { REPO_ROOT } from './paths';

const PROMPT = 'User: hello\nBot:';
const refusal = (file: string) => `state file ${JSON.stringify(file)}: not found in the state folder, or not allowed`;
const RELATIVE = /must be a path relative to the state folder/;

function makeEngine(config: EngineConfig) {
  const backend = new FakeBackend({ slots: 2 });
  return new RwkvEngine({ backend, tokenizer: byteTokenizer, config, cacheMinTokens: 16, compileConstraint: null });
}

async function rejectionOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  assert.fail('expected a rejection');
}

describe('state folder: confinement of state and conversation files', function () {
  this.timeout(20000);
  let base: string;
  let states: string;
  let outside: string;
  let engine: RwkvEngine;

  beforeEach(async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-confine-'));
    states = path.join(base, 'states');
    outside = path.join(base, 'outside');
    fs.mkdirSync(states);
    fs.mkdirSync(outside);
    // A valid conversation file outside the folder: reading it must not work through any path.
    const writer = makeEngine({ stateDir: outside });
    await writer.saveConversation(PROMPT, 'secret.cbor');
    await writer.close();
    fs.writeFileSync(path.join(outside, 'victim.txt'), 'precious text\n');
    engine = makeEngine({ stateDir: states });
  });
  afterEach(async () => {
    await engine.close();
    fs.rmSync(base, { recursive: true, force: true });
  });

  it('refuses "../" escapes for load and save, leaving files outside untouched', async () => {
    assert.match(await rejectionOf(engine.loadConversation('../outside/secret.cbor', 'c')), RELATIVE);
    assert.match(await rejectionOf(engine.saveConversation(PROMPT, '../outside/victim.txt')), RELATIVE);
    assert.match(await rejectionOf(engine.saveConversation(PROMPT, 'a/../../outside/new.cbor')), RELATIVE);
    assert.strictEqual(fs.readFileSync(path.join(outside, 'victim.txt'), 'utf8'), 'precious text\n');
    assert.ok(!fs.existsSync(path.join(outside, 'new.cbor')));
    assert.deepStrictEqual(engine.listStates(), []);
  });

  it('refuses a bad save path before the prompt runs on the model', async () => {
    const backend = new FakeBackend({ slots: 1 });
    const own = new RwkvEngine({ backend, tokenizer: byteTokenizer, config: { stateDir: states }, compileConstraint: null });
    try {
      assert.match(await rejectionOf(own.saveConversation(PROMPT, '../outside/queued.cbor')), RELATIVE);
      assert.strictEqual(backend.calls.length, 0);
    } finally {
      await own.close();
    }
  });

  it('refuses absolute paths, even to a readable state file', async () => {
    const secret = path.join(outside, 'secret.cbor');
    assert.match(await rejectionOf(engine.loadState('s', secret)), RELATIVE);
    assert.match(await rejectionOf(engine.saveConversation(PROMPT, path.join(outside, 'abs.cbor'))), RELATIVE);
    assert.ok(!fs.existsSync(path.join(outside, 'abs.cbor')));
  });

  it('refuses "." and empty paths with a message naming the problem', async () => {
    assert.match(await rejectionOf(engine.loadState('s', '.')), RELATIVE);
    assert.match(await rejectionOf(engine.saveConversation(PROMPT, './')), RELATIVE);
    assert.match(await rejectionOf(engine.loadState('s', '')), /state file "": is empty/);
  });

  it('refuses a symlinked folder inside the state folder that points out', async () => {
    fs.symlinkSync(outside, path.join(states, 'link'));
    assert.strictEqual(await rejectionOf(engine.loadConversation('link/secret.cbor', 'c')), refusal('link/secret.cbor'));
    assert.strictEqual(await rejectionOf(engine.saveConversation(PROMPT, 'link/new.cbor')), refusal('link/new.cbor'));
    assert.ok(!fs.existsSync(path.join(outside, 'new.cbor')));
    // A save through it into a deeper, missing subfolder creates nothing outside either.
    assert.strictEqual(await rejectionOf(engine.saveConversation(PROMPT, 'link/deep/new.cbor')), refusal('link/deep/new.cbor'));
    assert.ok(!fs.existsSync(path.join(outside, 'deep')));
  });

  it('refuses a symlinked file that points out, and does not replace the link on save', async () => {
    const link = path.join(states, 'alias.cbor');
    fs.symlinkSync(path.join(outside, 'secret.cbor'), link);
    assert.strictEqual(await rejectionOf(engine.loadConversation('alias.cbor', 'c')), refusal('alias.cbor'));
    assert.strictEqual(await rejectionOf(engine.saveConversation(PROMPT, 'alias.cbor')), refusal('alias.cbor'));
    assert.ok(fs.lstatSync(link).isSymbolicLink());
  });

  it('answers FIFOs at once with the one message, and file operations keep working after them', async () => {
    // Four blocked opens would hold all four libuv threads and stall every later file operation.
    const fifos = ['p0', 'p1', 'p2', 'p3'];
    for (const f of fifos) execFileSync('mkfifo', [path.join(states, f)]);
    const results = await Promise.allSettled(fifos.map((f) => engine.loadState(f, f)));
    assert.deepStrictEqual(
      results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'loaded')),
      fifos.map(refusal),
    );
    assert.strictEqual(await rejectionOf(engine.saveConversation(PROMPT, 'p0')), refusal('p0'));
    await engine.saveConversation(PROMPT, 'after.cbor');
    assert.strictEqual((await engine.loadConversation('after.cbor', 'after')).name, 'after');
  });

  it('refuses a symlink to /dev/zero without reading it', async () => {
    fs.symlinkSync('/dev/zero', path.join(states, 'zero.cbor'));
    assert.strictEqual(await rejectionOf(engine.loadState('z', 'zero.cbor')), refusal('zero.cbor'));
  });

  it('refuses a file or buffer larger than a state of this model can be, before reading it', async () => {
    // Sparse: 3 GiB of apparent size and no disk; reading it whole would take 3 GiB of memory.
    const big = path.join(states, 'big.cbor');
    fs.writeFileSync(big, '');
    fs.truncateSync(big, 3 * 1024 ** 3);
    assert.match(await rejectionOf(engine.loadState('b', 'big.cbor')), /is 3221225472 bytes, more than a state of this model can be/);
    const backend = new FakeBackend({ slots: 1 });
    const bound = stateSourceBound(backend.info, backend.stateSize);
    assert.match(await rejectionOf(engine.loadState('b', new Uint8Array(bound + 1))), /buffer: is \d+ bytes, more than a state of this model can be/);
  });

  it('never overwrites an existing file that is not a conversation file', async () => {
    fs.writeFileSync(path.join(states, 'notes.txt'), 'my notes\n');
    assert.match(await rejectionOf(engine.saveConversation(PROMPT, 'notes.txt')), /exists and is not an rwkv-flow conversation file/);
    assert.strictEqual(fs.readFileSync(path.join(states, 'notes.txt'), 'utf8'), 'my notes\n');
    assert.deepStrictEqual(fs.readdirSync(states), ['notes.txt']);
  });

  it('saves atomically: the whole file or nothing, and no temporary file left', async () => {
    // A failing rename (the target is a folder) must not leave the temporary file behind.
    fs.mkdirSync(path.join(states, 'taken.cbor'));
    await assert.rejects(engine.saveConversation(PROMPT, 'taken.cbor'));
    assert.deepStrictEqual(fs.readdirSync(states), ['taken.cbor']);
    assert.deepStrictEqual(fs.readdirSync(path.join(states, 'taken.cbor')), []);

    const first = await engine.saveConversation(PROMPT, 'sub/dir/chat.cbor');
    assert.deepStrictEqual(fs.readdirSync(path.join(states, 'sub', 'dir')), ['chat.cbor']);
    assert.strictEqual(fs.statSync(path.join(states, 'sub', 'dir', 'chat.cbor')).size, first.bytes);
    // An earlier conversation file is replaced, whole.
    const second = await engine.saveConversation(`${PROMPT} more`, 'sub/dir/chat.cbor');
    assert.deepStrictEqual(fs.readdirSync(path.join(states, 'sub', 'dir')), ['chat.cbor']);
    assert.strictEqual(fs.statSync(path.join(states, 'sub', 'dir', 'chat.cbor')).size, second.bytes);
    assert.strictEqual((await engine.loadConversation('sub/dir/chat.cbor', 'chat')).name, 'chat');
  });

  it('gives the same message for a missing file and a refused one', async () => {
    execFileSync('mkfifo', [path.join(states, 'fifo')]);
    fs.symlinkSync(path.join(outside, 'secret.cbor'), path.join(states, 'out'));
    fs.mkdirSync(path.join(states, 'folder'));
    const message = async (file: string) => (await rejectionOf(engine.loadState('s', file))).replace(JSON.stringify(file), '<file>');
    const missing = await message('missing');
    assert.strictEqual(missing, refusal('missing').replace('"missing"', '<file>'));
    for (const refused of ['fifo', 'out', 'folder', 'missing-folder/x']) assert.strictEqual(await message(refused), missing, refused);
  });

  it('uses ~/.rwkv-flow/states when no state folder is configured', async () => {
    const home = process.env.HOME;
    process.env.HOME = base; // os.homedir() follows HOME
    const name = `default-folder-${process.pid}.cbor`;
    const free = makeEngine({});
    try {
      await free.saveConversation(PROMPT, name);
      assert.ok(fs.existsSync(path.join(base, '.rwkv-flow', 'states', name)));
      assert.match(await rejectionOf(free.loadState('s', path.join(outside, 'secret.cbor'))), RELATIVE);
    } finally {
      process.env.HOME = home;
      await free.close();
      fs.rmSync(name, { force: true }); // where an unconfined engine would have put it
    }
  });
});

describe('state folder: host adapters', function () {
  this.timeout(20000);
  let base: string;
  let provider: FakeEngineProvider;

  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-confine-hosts-'));
    provider = new FakeEngineProvider();
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await releaseIdleEngines();
    setEngineProvider(undefined);
    fs.rmSync(base, { recursive: true, force: true });
  });

  it("n8n: honours n8n's file access policy on the real path inside the state folder", async () => {
    const states = path.join(base, 'states');
    fs.mkdirSync(path.join(states, 'public'), { recursive: true });
    fs.mkdirSync(path.join(states, 'private'));
    fs.symlinkSync(path.join(states, 'private'), path.join(states, 'alias')); // inside the folder, but to a blocked part
    const allowed = fs.realpathSync(path.join(states, 'public')) + path.sep;
    const judged: string[] = [];
    const run = async (file: string) => {
      const { ctx } = executeContext({
        params: { operation: 'saveConversation', prompt: 'User: hi', file, state: '' },
        credentials: { modelPath: '/m.st', precision: 'f16', maxBatch: 0, chunkSize: 0, cacheMiB: 0, stateDir: states, maxQueue: 0 },
      });
      // As n8n with N8N_RESTRICT_FILE_ACCESS_TO=<states>/public: resolvePath brands, isFilePathBlocked judges.
      Object.assign(ctx.helpers, {
        resolvePath: async (p: string) => p,
        isFilePathBlocked: (p: string) => {
          judged.push(p);
          return !p.startsWith(allowed);
        },
      });
      return new RwkvLoadState().execute!.call(ctx);
    };
    await run('public/ok.cbor');
    assert.ok(fs.existsSync(path.join(states, 'public', 'ok.cbor')));
    await assert.rejects(run('private/no.cbor'), (e: Error) => e.message === refusal('private/no.cbor'));
    await assert.rejects(run('alias/no.cbor'), (e: Error) => e.message === refusal('alias/no.cbor'));
    assert.ok(!fs.existsSync(path.join(states, 'private', 'no.cbor')));
    assert.strictEqual(judged[2], path.join(fs.realpathSync(states), 'private', 'no.cbor'), 'judged after following the symlink');
  });

  describe('Node-RED', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const helper = require('node-red-node-test-helper');
    helper.init(require.resolve('node-red'));
    const NODES = ['rwkv-model.js', 'rwkv-load-state.js'].map((f) => require(path.join(REPO_ROOT, 'nodes', 'node-red', f)));

    before(() => helper.startServer());
    after(() => helper.stopServer());
    afterEach(() => helper.unload());

    it('refuses a msg path with ".." or an absolute path; a relative one stays in the state folder', async () => {
      const states = path.join(base, 'states');
      fs.mkdirSync(states);
      fs.writeFileSync(path.join(base, 'outside.cbor'), 'not yours');
      await helper.load(NODES, [
        { id: 'm1', type: 'rwkv-model', modelPath: '/models/tiny.st', stateDir: states },
        { id: 'n1', type: 'rwkv-load-state', model: 'm1', operation: 'list', wires: [['out1']] },
        { id: 'out1', type: 'helper' },
      ]);
      const node = helper.getNode('n1');
      const nextError = () => new Promise<unknown>((resolve) => node.once('call:error', (c: { args: unknown[] }) => resolve(c.args[0])));
      for (const file of ['../outside.cbor', path.join(base, 'outside.cbor')]) {
        const err = nextError();
        node.receive({ operation: 'loadConversation', file, name: 'x' });
        assert.match(String(await err), /file: .* must be a path relative to the state folder/);
      }
      const err = nextError();
      node.receive({ operation: 'saveConversation', payload: 'hi', file: '../escape.cbor' });
      assert.match(String(await err), /must be a path relative to the state folder/);
      assert.ok(!fs.existsSync(path.join(base, 'escape.cbor')));
      assert.deepStrictEqual(provider.engine.listStates(), []);

      const out = new Promise<{ payload: { file: string } }>((resolve) => helper.getNode('out1').once('input', resolve));
      node.receive({ operation: 'saveConversation', payload: 'hi', file: 'mine.cbor' });
      assert.strictEqual((await out).payload.file, 'mine.cbor');
      assert.ok(fs.existsSync(path.join(states, 'mine.cbor')));
    });
  });
});
