// The Node-RED nodes in a real Node-RED runtime (node-red-node-test-helper), on a fake engine
// injected through the engine-provider seam. The same nodes on the real engine:
// nodes-real-engine.test.ts.

import { redeploy } from './node-red-redeploy';
import * as assert from 'assert';
import { EventEmitter } from 'events';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { fakeBackendEngineProvider } from './fake-backend-engine';
import { FakeEngineProvider } from './nodes-fake-engine';
import { REPO_ROOT } from './paths';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const helper = require('node-red-node-test-helper') as TestHelper;
helper.init(require.resolve('node-red'));

interface TestHelper {
  init(runtimePath: string): void;
  startServer(): Promise<void>;
  stopServer(): Promise<void>;
  load(nodes: unknown[], flow: object[]): Promise<void>;
  unload(): Promise<void>;
  getNode(id: string): TestNode | null;
  /** supertest against the runtime's admin HTTP API. */
  request(): { get(path: string): { expect(status: number): Promise<{ body: any }> } };
}

interface TestNode {
  receive(msg: object): void;
  on(event: string, listener: (arg: any) => void): void;
  once(event: string, listener: (arg: any) => void): void;
}

type Msg = Record<string, any>;

const nodeModule = (file: string) => require(path.join(REPO_ROOT, 'nodes', 'node-red', file));
const ALL_NODES = ['rwkv-model.js', 'rwkv-generate.js', 'rwkv-choose.js', 'rwkv-embed.js', 'rwkv-load-state.js'].map(nodeModule);

const MODEL = { id: 'm1', type: 'rwkv-model', modelPath: '/models/tiny.st', precision: 'f16', maxBatch: '4', cacheMiB: '2' };

function flowWith(node: Record<string, unknown>, outputs = 1): object[] {
  const wires = Array.from({ length: outputs }, (_, i) => [`out${i + 1}`]);
  return [
    MODEL,
    { id: 'n1', model: 'm1', wires, ...node },
    ...wires.map(([id]) => ({ id, type: 'helper' })),
  ];
}

/** Resolves with the next message a helper node receives. */
function nextMessage(id: string): Promise<Msg> {
  return new Promise((resolve) => helper.getNode(id)!.once('input', resolve));
}

/** Resolves with the error the node reports (done(err) → node.error). */
function nextError(id: string): Promise<Error | string> {
  return new Promise((resolve) => helper.getNode(id)!.once('call:error', (call) => resolve(call.args[0])));
}

function collectStatus(id: string): string[] {
  const texts: string[] = [];
  helper.getNode(id)!.on('call:status', (call) => texts.push(call.args[0].text));
  return texts;
}

const until = async (cond: () => boolean, what: string) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), `timed out waiting for ${what}`);
};

describe('Node-RED nodes (fake engine)', function () {
  let provider: FakeEngineProvider;

  before(() => helper.startServer());
  after(() => helper.stopServer());
  beforeEach(() => {
    provider = new FakeEngineProvider();
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await helper.unload();
    setEngineProvider(undefined);
  });

  describe('rwkv-model', () => {
    it('acquires one lease with the parsed configuration and releases it on close', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      await until(() => provider.acquired === 1, 'lease');
      assert.deepStrictEqual(provider.configs[0], {
        modelPath: '/models/tiny.st',
        precision: 'f16',
        maxBatch: 4,
        cacheBytes: 2 * 1024 * 1024,
      });
      await helper.unload();
      await helper.load(ALL_NODES, [{ ...MODEL, id: 'm2', maxTokensLimit: '512', requestTimeoutSeconds: '0', maxStates: '3' }]);
      await until(() => provider.acquired === 2, 'second lease');
      assert.deepStrictEqual(
        { ...provider.configs[1], modelPath: undefined, precision: undefined, maxBatch: undefined, cacheBytes: undefined },
        { modelPath: undefined, precision: undefined, maxBatch: undefined, cacheBytes: undefined, maxTokensLimit: 512, requestTimeoutMs: 0, maxStates: 3 },
      );
      await helper.unload();
      assert.strictEqual(provider.released, 2);
    });

    it('passes the quantised layers with int8 and nf4, and the editor shows the field for them only, with its help', async () => {
      await helper.load(ALL_NODES, [{ ...MODEL, precision: 'nf4', quantLayers: '2' }]);
      await until(() => provider.acquired === 1, 'lease');
      assert.strictEqual(provider.configs[0].quantLayers, 2);
      await helper.unload();
      await helper.load(ALL_NODES, [{ ...MODEL, precision: 'f16', quantLayers: '2' }]);
      await until(() => provider.acquired === 2, 'second lease');
      assert.strictEqual(provider.configs[1].quantLayers, undefined, 'a value left in the hidden field under f16 is not a setting');
      const html = fs.readFileSync(path.join(REPO_ROOT, 'nodes', 'node-red', 'rwkv-model.html'), 'utf8');
      assert.match(html, /quantLayers: \{ value: '', validate: blankOr\(/);
      assert.match(html, /<div class="form-row rwkv-model-quant">\s*<label for="node-config-input-quantLayers">/);
      assert.match(html, /\.rwkv-model-quant'\)\.toggle\(v === 'int8' \|\| v === 'nf4'\)/);
      assert.match(html, /<dt>Quant\. layers <span class="property-type">integer<\/span><\/dt>\s*<dd>With <code>int8<\/code> or <code>nf4<\/code>: how many layers, counting from the first/);
    });

    it('reports a bad configuration on every message instead of crashing', async () => {
      await helper.load(ALL_NODES, [{ ...MODEL, precision: 'f8' }, { id: 'n1', type: 'rwkv-embed', model: 'm1', wires: [[]] }]);
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'hi' });
      assert.match(String(await err), /precision: must be "f16", "f32", "int8" or "nf4"/);
      assert.strictEqual(provider.acquired, 0);
    });

    it('reports a model that fails to load', async () => {
      provider.failWith = new Error('model file not found: /models/tiny.st');
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-embed' }));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'hi' });
      assert.match(String(await err), /model file not found/);
    });

    it('a worker without a model configuration fails its messages with done(err)', async () => {
      await helper.load(ALL_NODES, [{ id: 'n1', type: 'rwkv-choose', wires: [[]] }]);
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'x' });
      assert.match(String(await err), /no rwkv-model configuration selected/);
    });
  });

  describe('rwkv-generate', () => {
    it('completes a string prompt, with usage and progress status', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', maxTokens: '16' }, 2));
      const status = collectStatus('n1');
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'The quick brown fox', topic: 't' });
      const msg = await out;
      assert.strictEqual(msg.payload, ' echo: quick brown fox');
      assert.strictEqual(msg.topic, 't');
      assert.strictEqual(msg.rwkv.finishReason, 'stop');
      assert.deepStrictEqual(msg.rwkv.usage, { promptTokens: 19, completionTokens: 4, totalTokens: 23 });
      assert.strictEqual(provider.engine.requests[0].maxTokens, 16);
      await until(() => status.some((s) => s.startsWith('done')), 'done status');
      // The deploy-time 'ready' status may land before or after the listener is attached.
      assert.deepStrictEqual(status.filter((s) => !s.startsWith('ready:')), ['queued (#0)', 'prefill 0/19', 'prefill 19/19', '1 token', '2 tokens', '3 tokens', '4 tokens', 'done: 4 tokens (stop)']);
    });

    it('formats chat messages as an RWKV dialogue and stops at the next user turn', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', system: 'Be brief.' }, 2));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: [{ role: 'user', content: 'Hi\n\nthere' }] });
      const msg = await out;
      const req = provider.engine.requests[0];
      assert.strictEqual(req.prompt, 'System: Be brief.\n\nUser: Hi\nthere\n\nAssistant:');
      assert.deepStrictEqual(req.stop, ['\n\nUser:', '\n\nAssistant:', '\n\nSystem:', '\n\nTool:']);
      // The fake echoes the prompt's last words; chat replies come back trimmed.
      assert.strictEqual(msg.payload, 'echo: Hi there Assistant:');
    });

    it('takes msg overrides over the node configuration', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', maxTokens: '100', temperature: '0.5', stop: '\\n\\n' }, 2));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'a b c d e f', maxTokens: 2, topP: 0.1, sampler: { seed: 7 }, stop: ['END'] });
      const msg = await out;
      const req = provider.engine.requests[0];
      assert.strictEqual(req.maxTokens, 2);
      assert.deepStrictEqual(req.stop, ['END']);
      assert.deepStrictEqual(req.sampler, { seed: 7, temperature: 0.5, topP: 0.1 });
      assert.strictEqual(msg.rwkv.finishReason, 'length');
    });

    it('decodes escapes in the configured stop sequence', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', stop: '\\n\\nQ:' }, 2));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'x' });
      await out;
      assert.deepStrictEqual(provider.engine.requests[0].stop, ['\n\nQ:']);
    });

    it("the config node's model picker lists the model files of the models folder, by name and size", async () => {
      const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-models-'));
      for (const [name, bytes] of [['b.pth', 3], ['a.st', 2], ['notes.txt', 1]] as const) fs.writeFileSync(path.join(folder, name), Buffer.alloc(bytes));
      fs.mkdirSync(path.join(folder, 'dir.st'));
      process.env.RWKV_FLOW_MODELS = folder;
      try {
        await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
        const { body } = await helper.request().get('/rwkv-flow/models').expect(200);
        assert.strictEqual(body.folder, folder);
        assert.deepStrictEqual(body.files, [
          { path: path.join(folder, 'a.st'), name: 'a.st', bytes: 2 },
          { path: path.join(folder, 'b.pth'), name: 'b.pth', bytes: 3 },
        ]);
      } finally {
        delete process.env.RWKV_FLOW_MODELS;
        fs.rmSync(folder, { recursive: true, force: true });
      }
    });

    it('shows at deploy which model runs on which adapter, before any message', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      // The test helper wraps node.status in a spy.
      const status = (helper.getNode('n1') as unknown as { status: { called: boolean; lastCall: { args: [Record<string, string>] } } }).status;
      await until(() => status.called, 'a status at deploy');
      assert.deepStrictEqual(status.lastCall.args[0], { fill: 'green', shape: 'ring', text: 'ready: RWKV v7 3×8 on fake' });
    });

    it('shows a model that failed to load at deploy, in red', async () => {
      provider.failWith = new Error('model file not found: /models/missing.st');
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const status = (helper.getNode('n1') as unknown as { status: { called: boolean; lastCall: { args: [Record<string, string>] } } }).status;
      await until(() => status.called, 'a status at deploy');
      assert.strictEqual(status.lastCall.args[0].fill, 'red');
      assert.match(status.lastCall.args[0].text, /model file not found/);
    });

    it('streams one message per token on output 2 before the result on output 1', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', stream: true }, 2));
      const pieces: Msg[] = [];
      helper.getNode('out2')!.on('input', (m) => pieces.push(m));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'one two three' });
      const msg = await out;
      assert.deepStrictEqual(pieces.map((p) => p.payload), [' echo:', ' one', ' two', ' three', '']);
      assert.deepStrictEqual(pieces.map((p) => p.rwkv.index), [0, 1, 2, 3, 4]);
      // Only the last one is the end marker, and it says why the generation stopped.
      assert.deepStrictEqual(pieces.map((p) => p.rwkv.end === true), [false, false, false, false, true]);
      assert.strictEqual(pieces[4].rwkv.finishReason, msg.rwkv.finishReason);
      assert.strictEqual(pieces.map((p) => p.payload).join(''), msg.payload);
    });

    it('returns the parsed JSON for a JSON schema', async () => {
      const schema = { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'] };
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', constraint: 'jsonSchema', jsonSchema: JSON.stringify(schema) }, 2));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'abc' });
      const msg = await out;
      assert.deepStrictEqual(msg.payload, { answer: 3 });
      assert.deepStrictEqual(provider.engine.requests[0].jsonSchema, schema);
    });

    it('ignores a stored schema when the constraint selector is off', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate', constraint: 'none', jsonSchema: '{"type":"object"}' }, 2));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'abc' });
      assert.strictEqual(typeof (await out).payload, 'string');
      assert.strictEqual(provider.engine.requests[0].jsonSchema, undefined);
    });

    it('a bad schema fails the message with an error naming it, and the node keeps working', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const status = collectStatus('n1');
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'x', jsonSchema: { type: 'objekt' } });
      assert.match(String(await err), /jsonSchema: is not a valid JSON Schema/);
      await until(() => status.some((s) => s.startsWith('error')), 'error status');
      assert.strictEqual(provider.engine.requests.length, 0);

      const err2 = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'x', jsonSchema: '{not json' });
      assert.match(String(await err2), /jsonSchema: is not valid JSON/);

      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'still alive' });
      assert.strictEqual((await out).payload, ' echo: still alive');
    });

    it('an empty prompt is an error, not a generation', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: '' });
      assert.match(String(await err), /prompt: is empty/);
    });

    it('runs concurrent messages concurrently (one batch on the engine)', async () => {
      provider.engine.options.tokenDelayMs = 20;
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const results: Msg[] = [];
      helper.getNode('out1')!.on('input', (m) => results.push(m));
      for (let i = 0; i < 3; i++) helper.getNode('n1')!.receive({ payload: `p${i}` });
      await until(() => results.length === 3, 'three results');
      assert.strictEqual(provider.engine.maxActive, 3);
    });

    for (const [what, closeIt] of [
      ['a full redeploy', async () => redeploy(helper, flowWith({ type: 'rwkv-generate' }, 2))],
      ['removing the node', async () => redeploy(helper, [MODEL])],
      ['stopping the runtime', async () => helper.unload()],
    ] as const) {
      it(`${what} during generation cancels it, frees the slot and the lease, and ends the message with done(err)`, async () => {
        provider.engine.options.tokenDelayMs = 30;
        await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
        const sent: Msg[] = [];
        helper.getNode('out1')!.on('input', (m) => sent.push(m));
        // Wrapped on the instance: stopping the runtime (helper.unload) removes the helper's call:error spies first.
        const errors: unknown[] = [];
        const worker = helper.getNode('n1') as unknown as { error: (...args: unknown[]) => void };
        const reportError = worker.error;
        worker.error = (...args: unknown[]) => (errors.push(args[0]), reportError.apply(worker, args));
        helper.getNode('n1')!.receive({ payload: 'a long prompt with many words to echo back slowly' });
        await until(() => provider.engine.active === 1, 'generation started');
        await closeIt();
        assert.strictEqual(provider.engine.active, 0, 'slot still held after close');
        assert.strictEqual(provider.engine.aborted, 1);
        assert.ok(provider.released >= 1, 'lease not released');
        await new Promise((r) => setTimeout(r, 50));
        assert.deepStrictEqual(sent, []);
        // A Catch node gets the message and can answer its HTTP caller (before: a silent done()).
        assert.strictEqual(errors.length, 1);
        assert.match(String(errors[0]), /rwkv-generate closed \(redeploy, removal or shutdown\) before the answer/);
      });
    }

    it('ends every in-flight message of a closing node with done(err)', async () => {
      provider.engine.options.tokenDelayMs = 30;
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const errors: { err: unknown; msg: Msg }[] = [];
      helper.getNode('n1')!.on('call:error', (c) => errors.push({ err: c.args[0], msg: c.args[1] }));
      for (let i = 0; i < 10; i++) helper.getNode('n1')!.receive({ payload: `a long prompt with many words number ${i}`, topic: `m${i}` });
      await until(() => provider.engine.active === 10, 'ten generations running');
      await redeploy(helper, flowWith({ type: 'rwkv-generate' }, 2));
      assert.strictEqual(provider.engine.active, 0);
      assert.strictEqual(errors.length, 10);
      assert.deepStrictEqual(errors.map((e) => e.msg.topic).sort(), Array.from({ length: 10 }, (_, i) => `m${i}`).sort());
      for (const e of errors) assert.match(String(e.err), /closed \(redeploy/);
    });

    it('cancels the request when the HTTP caller disconnects (msg.res closed), without a "done" status', async () => {
      provider.engine.options.tokenDelayMs = 30;
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const status = collectStatus('n1');
      const sent: Msg[] = [];
      helper.getNode('out1')!.on('input', (m) => sent.push(m));
      const err = nextError('n1');
      // http-in's msg.res wraps the express response as msg.res._res.
      const response = Object.assign(new EventEmitter(), { writableFinished: false });
      helper.getNode('n1')!.receive({ payload: 'a long prompt with many words to echo back slowly', res: { _res: response }, req: {} });
      await until(() => provider.engine.active === 1, 'generation started');
      response.emit('close');
      assert.match(String(await err), /HTTP caller disconnected/);
      await until(() => provider.engine.active === 0, 'slot freed');
      assert.strictEqual(provider.engine.aborted, 1);
      assert.deepStrictEqual(sent, []);
      assert.ok(!status.some((s) => s.startsWith('done')), `status said done: ${status.join(' | ')}`);
      assert.strictEqual(response.listenerCount('close'), 0, 'listener removed');
    });

    it('cancels one in-flight message by a cancel message naming its requestId or _msgid; the others go on', async () => {
      provider.engine.options.tokenDelayMs = 30;
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const status = collectStatus('n1');
      const sent: Msg[] = [];
      helper.getNode('out1')!.on('input', (m) => sent.push(m));
      const errors: { err: unknown; msg: Msg }[] = [];
      helper.getNode('n1')!.on('call:error', (c) => errors.push({ err: c.args[0], msg: c.args[1] }));
      const long = 'a long prompt with many words to echo back slowly';
      helper.getNode('n1')!.receive({ payload: long, requestId: 'job-7', topic: 'a' });
      helper.getNode('n1')!.receive({ payload: long, _msgid: 'msg-b', topic: 'b' });
      helper.getNode('n1')!.receive({ payload: 'short one', topic: 'c' });
      await until(() => provider.engine.active === 3, 'three generations running');
      helper.getNode('n1')!.receive({ cancel: 'job-7' });
      await until(() => errors.length === 1, 'the first cancelled');
      assert.strictEqual(errors[0].msg.topic, 'a');
      assert.match(String(errors[0].err), /request job-7 cancelled by a cancel message/);
      assert.ok(status.some((s) => s.endsWith('cancelled: by a cancel message')), status.join(' | '));
      helper.getNode('n1')!.receive({ topic: 'cancel', payload: 'msg-b' });
      await until(() => errors.length === 2, 'the second cancelled');
      assert.strictEqual(errors[1].msg.topic, 'b');
      await until(() => sent.length === 1, 'the third answered');
      assert.strictEqual(sent[0].topic, 'c');
      assert.strictEqual(provider.engine.aborted, 2);
      assert.strictEqual(provider.engine.active, 0);
    });

    it('refuses a malformed cancel message with a clear error and starts nothing', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ cancel: { $gt: '' } });
      assert.match(String(await err), /a cancel message must name the request/);
      assert.strictEqual(provider.engine.requests.length, 0);
    });

    it('leaves a request alone whose response closed after being answered', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-generate' }, 2));
      const response = Object.assign(new EventEmitter(), { writableFinished: true });
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'The quick brown fox', res: { _res: response } });
      response.emit('close');
      assert.strictEqual((await out).payload, ' echo: quick brown fox');
    });

    it('enforces the max-tokens limit of the model configuration; a message cannot lift it', async () => {
      const real = fakeBackendEngineProvider();
      setEngineProvider(real.provide);
      await helper.load(ALL_NODES, [{ ...MODEL, maxTokensLimit: '8', requestTimeoutSeconds: '30', maxStates: '2' }, ...flowWith({ type: 'rwkv-generate' }, 2).slice(1)]);
      await until(() => real.engines.length === 1, 'engine');
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'hi', maxTokens: 1_048_576, maxTokensLimit: 1_048_576, requestTimeoutMs: 0 });
      assert.match(String(await err), /maxTokens 1048576 is above this model's limit of 8/);
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: { prompt: 'hi', maxTokensLimit: 100 } });
      assert.strictEqual((await out).rwkv.usage.completionTokens, 8, 'an unset maxTokens gets min(256, limit)');
    });
  });

  describe('rwkv-choose', () => {
    it('outputs the best choice and the ranking', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-choose', choices: 'cat\ndog\n\nbird' }));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'the bird sang' });
      const msg = await out;
      assert.strictEqual(msg.payload, 'bird');
      assert.deepStrictEqual(msg.ranking.map((r: Msg) => r.choice).sort(), ['bird', 'cat', 'dog']);
      assert.strictEqual(msg.rwkv.index, 2);
    });

    it('takes choices from the message', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-choose', choices: 'a\nb' }));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: { prompt: 'yes please', choices: [' no', ' yes'] } });
      assert.strictEqual((await out).payload, ' yes');
    });

    it('rejects a single choice', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-choose', choices: 'only' }));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'q' });
      assert.match(String(await err), /choices: needs at least two choices, got 1/);
    });
  });

  describe('rwkv-embed', () => {
    it('embeds one text and a batch of texts', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-embed', layer: '1' }));
      let out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: 'hello' });
      let msg = await out;
      assert.strictEqual(msg.payload.length, 8);
      assert.strictEqual(msg.dimensions, 8);
      const single = msg.payload;

      out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: ['hello', 'world'] });
      msg = await out;
      assert.strictEqual(msg.payload.length, 2);
      assert.deepStrictEqual(msg.payload[0], single);
      assert.notDeepStrictEqual(msg.payload[1], single);
    });

    it('pools as configured (msg overrides) and normalises to unit length', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-embed', pooling: 'last', normalize: true }));
      const out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: ['hello', 'world'], pooling: 'mean' });
      const msg = await out;
      assert.deepStrictEqual(provider.engine.embedPoolings, ['mean', 'mean']);
      for (const v of msg.payload as number[][]) assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-6);
    });

    it('rejects a layer the model does not have', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-embed' }));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 'x', layer: 3 });
      assert.match(String(await err), /layer: must be below the model's 3 layers/);
    });

    it('names the bad element of a batch', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-embed' }));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: ['ok', 42] });
      assert.match(String(await err), /payload\[1\]: text: must be a string/);
    });
  });

  describe('rwkv-load-state', () => {
    it('loads from a buffer, lists, saves and loads a conversation, unloads', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-nr-'));
      const flow = flowWith({ type: 'rwkv-load-state', name: 'label', operation: 'load', stateName: 'tuned' });
      flow[0] = { ...MODEL, stateDir: dir }; // files are relative to the model's state folder
      await helper.load(ALL_NODES, flow);
      let out = nextMessage('out1');
      helper.getNode('n1')!.receive({ payload: Buffer.from([1, 2, 3]) });
      assert.deepStrictEqual((await out).payload, { operation: 'load', state: { name: 'tuned', source: 'buffer', bytes: 3 } });

      out = nextMessage('out1');
      const file = 'chat.cbor';
      helper.getNode('n1')!.receive({ operation: 'saveConversation', payload: 'User: hi\n\nAssistant: hello', file });
      assert.deepStrictEqual((await out).payload, { operation: 'saveConversation', file, bytes: 26, tokens: 26 });
      assert.ok(fs.existsSync(path.join(dir, file)));

      out = nextMessage('out1');
      helper.getNode('n1')!.receive({ operation: 'loadConversation', file, name: 'chat' });
      assert.strictEqual((await out).payload.state.name, 'chat');

      out = nextMessage('out1');
      helper.getNode('n1')!.receive({ operation: 'list' });
      assert.deepStrictEqual((await out).payload.states.map((s: Msg) => s.name), ['tuned', 'chat']);

      out = nextMessage('out1');
      helper.getNode('n1')!.receive({ operation: 'unload', name: 'tuned' });
      assert.deepStrictEqual((await out).payload.states.map((s: Msg) => s.name), ['chat']);
      fs.rmSync(dir, { recursive: true });
    });

    it('reports a missing state name and an unknown operation', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-load-state', operation: 'load', source: '/x.st' }));
      let err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 1 });
      assert.match(String(await err), /name: is required for this operation/);
      err = nextError('n1');
      helper.getNode('n1')!.receive({ operation: 'delete' });
      assert.match(String(await err), /operation: must be one of load, unload, list, saveConversation, loadConversation/);
    });

    it('passes engine errors through (state file not found)', async () => {
      await helper.load(ALL_NODES, flowWith({ type: 'rwkv-load-state', operation: 'load', stateName: 's', source: 'nonexistent/x.st' }));
      const err = nextError('n1');
      helper.getNode('n1')!.receive({ payload: 1 });
      assert.match(String(await err), /ENOENT/);
    });
  });
});
