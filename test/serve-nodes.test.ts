// The node suites' key cases, each run twice — the engine in this process, and the same engine behind an
// `rwkv-flow serve` server reached through the model configuration's "server" mode — with the same results:
// outputs, streamed chunks, errors, cancellation freeing the slot, states and conversation files. Both engines
// are real RwkvEngines on the fake CPU backend, built identically, so any difference is the remote path's.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { INodeType } from 'n8n-workflow';
import type { RwkvEngine } from '../engine/engine';
import type { RunningServer } from '../engine/server/server';
import { releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import { RwkvChoose } from '../nodes/RwkvChoose/RwkvChoose.node';
import { RwkvEmbed } from '../nodes/RwkvEmbed/RwkvEmbed.node';
import { RwkvGenerate } from '../nodes/RwkvGenerate/RwkvGenerate.node';
import { RwkvLoadState } from '../nodes/RwkvLoadState/RwkvLoadState.node';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { executeContext, type ContextOptions } from './nodes-n8n-context';
import { REPO_ROOT } from './paths';
import { fakeEngine, serveOn, until } from './serve-fixtures';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const helper = require('node-red-node-test-helper');
helper.init(require.resolve('node-red'));

type Msg = Record<string, any>;
const KEY = 'nodes-key';
const NODE_RED = ['rwkv-model.js', 'rwkv-generate.js', 'rwkv-choose.js', 'rwkv-embed.js', 'rwkv-load-state.js'].map((f) =>
  require(path.join(REPO_ROOT, 'nodes', 'node-red', f)),
);

interface Mode {
  name: 'in process' | 'server';
  engine: RwkvEngine;
  stateDir: string;
  /** The n8n credential. */
  credential: Record<string, unknown>;
  /** The Node-RED rwkv-model config node and its credentials. */
  modelNode: Msg;
  modelCredentials: Record<string, Record<string, string>>;
}

/** Runs `scenario` with the engine in this process, then through a server; asserts the results are equal. */
async function bothModes<T>(scenario: (mode: Mode) => Promise<T>, backend: { delayMs?: number } = {}): Promise<T> {
  const results: T[] = [];
  for (const name of ['in process', 'server'] as const) {
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-serve-nodes-'));
    const { engine } = fakeEngine({ slots: 4, ...backend }, { stateDir });
    let server: RunningServer | undefined;
    let mode: Mode;
    if (name === 'in process') {
      setEngineProvider(async () => ({ engine, release: async () => undefined }));
      mode = {
        name,
        engine,
        stateDir,
        credential: { engineMode: 'process', modelPath: '/models/fake.st', precision: 'f16', maxBatch: 0, chunkSize: 0, cacheMiB: 0, stateDir, maxQueue: 0 },
        modelNode: { id: 'm1', type: 'rwkv-model', stateDir },
        modelCredentials: {},
      };
    } else {
      // No provider override: the nodes reach the server through the real engine-provider path.
      setEngineProvider(undefined);
      server = await serveOn(engine, { apiKey: KEY });
      mode = {
        name,
        engine,
        stateDir,
        credential: { engineMode: 'server', serverUrl: server.url, apiKey: KEY, modelPath: '', precision: 'f16', maxBatch: 0, chunkSize: 0, cacheMiB: 0, stateDir: '', maxQueue: 0 },
        modelNode: { id: 'm1', type: 'rwkv-model', engineMode: 'server', serverUrl: server.url },
        modelCredentials: { m1: { apiKey: KEY } },
      };
    }
    try {
      results.push(await scenario(mode));
    } finally {
      await releaseIdleEngines();
      await server?.close();
      await engine.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  }
  assert.deepStrictEqual(results[1], results[0], 'the server gave other results than the in-process engine');
  return results[0];
}

/** Outputs without wall-clock timings. */
function untimed(value: unknown): any {
  if (Array.isArray(value)) return value.map(untimed);
  if (value && typeof value === 'object' && !(value instanceof Uint8Array)) {
    return Object.fromEntries(Object.entries(value).filter(([k]) => k !== 'timing').map(([k, v]) => [k, untimed(v)]));
  }
  return value;
}

async function runN8n(node: INodeType, mode: Mode, opts: Omit<ContextOptions, 'credentials'>) {
  const { ctx, chunks } = executeContext({ ...opts, credentials: mode.credential });
  const out = (await node.execute!.call(ctx)) as { json: Msg }[][];
  return { out: untimed(out[0].map((o) => o.json)), chunks };
}

async function failureOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail('expected a failure');
}

const GENERATE = { inputMode: 'prompt', maxTokens: 12, constraint: 'none' };
const items = (n: number) => Array.from({ length: n }, (_, i) => ({ json: { i } }));

describe('nodes in process and through rwkv-flow serve: same results', function () {
  this.timeout(60000);
  beforeEach(() => (process.env.RWKV_FLOW_IDLE_SECONDS = '0'));
  afterEach(() => {
    setEngineProvider(undefined);
    delete process.env.RWKV_FLOW_IDLE_SECONDS;
  });

  describe('n8n', () => {
    it('RWKV Generate: items batched, outputs paired, greedy and seeded', async () => {
      const out = await bothModes(async (mode) => {
        const prompts = ['The quick brown fox', 'Once upon a time', 'x'];
        const greedy = await runN8n(new RwkvGenerate(), mode, { items: items(3), params: { ...GENERATE, prompt: (i: number) => prompts[i], options: { temperature: 0 } } });
        const seeded = await runN8n(new RwkvGenerate(), mode, { params: { ...GENERATE, prompt: 'seeded', options: { seed: 7, temperature: 1.3, topP: 0.9 } } });
        return { greedy: greedy.out, seeded: seeded.out };
      });
      assert.strictEqual(out.greedy.length, 3);
      assert.strictEqual(out.greedy[0].usage.promptTokens, 19);
    });

    it('RWKV Generate: streamed chunks', async () => {
      const chunks = await bothModes(async (mode) => {
        const r = await runN8n(new RwkvGenerate(), mode, { streaming: true, params: { ...GENERATE, prompt: 'stream me', options: { seed: 2 } } });
        return { chunks: r.chunks, out: r.out };
      });
      assert.ok(chunks.chunks.length > 3);
    });

    it('RWKV Generate: an engine error fails the node with the engine\'s message', async () => {
      const message = await bothModes((mode) =>
        failureOf(runN8n(new RwkvGenerate(), mode, { params: { ...GENERATE, prompt: 'p', options: { state: 'never-loaded' } } })),
      );
      assert.match(message, /never-loaded/);
    });

    it('RWKV Generate: cancelling the execution cancels the generation and frees its slot', async () => {
      await bothModes(
        async (mode) => {
          const cancel = new AbortController();
          const running = runN8n(new RwkvGenerate(), mode, {
            cancelSignal: cancel.signal,
            params: { ...GENERATE, prompt: 'a long one', maxTokens: 4000, options: { seed: 1 } },
          });
          await until(() => mode.engine.metrics().decodeTokens > 3, 'generation to run');
          cancel.abort();
          const message = await failureOf(running);
          await until(() => mode.engine.metrics().active === 0, 'the slot to be freed', 5000);
          return message;
        },
        { delayMs: 5 },
      );
    });

    it('RWKV Choose and RWKV Embed', async () => {
      const out = await bothModes(async (mode) => {
        const choose = await runN8n(new RwkvChoose(), mode, {
          params: { prompt: 'the dog barked', choicesMode: 'list', choices: { choice: [{ text: ' cat' }, { text: ' dog' }, { text: ' bird' }] }, options: { calibrate: true } },
        });
        const embed = await runN8n(new RwkvEmbed(), mode, { items: items(2), params: { text: (i: number) => `text ${i}`, options: { layer: 0 } } });
        const badLayer = await failureOf(runN8n(new RwkvEmbed(), mode, { params: { text: 'x', options: { layer: 5 } } }));
        return { choose: choose.out, embed: embed.out, badLayer };
      });
      assert.strictEqual(out.choose[0].ranking.length, 3);
      assert.strictEqual(out.embed[0].embedding.length, 4);
    });

    it('RWKV Load State: conversation saved and loaded in the engine\'s state folder, states listed and unloaded', async () => {
      await bothModes(async (mode) => {
        const run = (params: Record<string, unknown>) => runN8n(new RwkvLoadState(), mode, { params }).then((r) => r.out[0]);
        const saved = await run({ operation: 'saveConversation', prompt: 'User: hi', file: 'chats/c.cbor', state: '' });
        assert.ok(fs.existsSync(path.join(mode.stateDir, 'chats', 'c.cbor')), `${mode.name}: file not in the engine's folder`);
        const loaded = await run({ operation: 'loadConversation', file: 'chats/c.cbor', name: 'chat' });
        const continued = await runN8n(new RwkvGenerate(), mode, { params: { ...GENERATE, prompt: ' more', options: { state: 'chat', temperature: 0 } } });
        const listed = await run({ operation: 'list' });
        const unloaded = await run({ operation: 'unload', name: 'chat' });
        const escaping = await failureOf(run({ operation: 'loadConversation', file: '../c.cbor', name: 'x' }));
        return { saved, loaded, continued: continued.out, listed, unloaded, escaping };
      });
    });
  });

  describe('Node-RED', () => {
    before(() => helper.startServer());
    after(() => helper.stopServer());
    afterEach(() => helper.unload());
    /** A scenario whose flow is stopped before its engine (and server) are. */
    const inFlows = <T>(scenario: (mode: Mode) => Promise<T>, backend?: { delayMs?: number }) =>
      bothModes(async (mode) => {
        try {
          return await scenario(mode);
        } finally {
          await helper.unload();
        }
      }, backend);

    const flow = (mode: Mode, node: Msg, outputs = 1) => [
      mode.modelNode,
      { id: 'n1', model: 'm1', wires: Array.from({ length: outputs }, (_, i) => [`out${i + 1}`]), ...node },
      ...Array.from({ length: outputs }, (_, i) => ({ id: `out${i + 1}`, type: 'helper' })),
    ];
    const load = async (mode: Mode, node: Msg, outputs = 1) => {
      await helper.unload(); // the flow of the other mode or step
      await helper.load(NODE_RED, flow(mode, node, outputs), mode.modelCredentials);
    };
    /** The node's output for msg, or its error; both listeners go once it settles. */
    const send = (msg: Msg, out = 'out1'): Promise<Msg> =>
      new Promise<Msg>((resolve, reject) => {
        const outNode = helper.getNode(out);
        const node = helper.getNode('n1');
        const cleanup = () => {
          outNode.removeListener('input', onInput);
          node.removeListener('call:error', onError);
        };
        const onInput = (m: Msg) => (cleanup(), resolve(m));
        const onError = (c: Msg) => (cleanup(), reject(new Error(String(c.args[0]?.message ?? c.args[0]))));
        outNode.on('input', onInput);
        node.on('call:error', onError);
        node.receive(msg);
      });

    it('rwkv-generate: result message and one message per token', async () => {
      await inFlows(async (mode) => {
        await load(mode, { type: 'rwkv-generate', maxTokens: '10', seed: '4', stream: true }, 2);
        const pieces: string[] = [];
        helper.getNode('out2').on('input', (m: Msg) => pieces.push(m.payload));
        const msg = await send({ payload: 'The quick brown fox', topic: 't' });
        await helper.unload();
        return { payload: msg.payload, topic: msg.topic, rwkv: untimed(msg.rwkv), pieces };
      });
    });

    it('rwkv-generate: closing the flow during a generation cancels it and frees the slot', async () => {
      await inFlows(
        async (mode) => {
          await load(mode, { type: 'rwkv-generate', maxTokens: '4000' });
          helper.getNode('n1').receive({ payload: 'go on and on' });
          await until(() => mode.engine.metrics().decodeTokens > 3, 'generation to run');
          await helper.unload();
          await until(() => mode.engine.metrics().active === 0, 'the slot to be freed', 5000);
          return 'freed';
        },
        { delayMs: 5 },
      );
    });

    it('rwkv-choose, rwkv-embed and their errors', async () => {
      await inFlows(async (mode) => {
        await load(mode, { type: 'rwkv-choose', choices: 'cat\ndog\nbird' });
        const chosen = await send({ payload: 'the bird sang' });
        await helper.unload();
        await load(mode, { type: 'rwkv-embed', layer: '0' });
        const embedded = await send({ payload: ['hello', 'world'] });
        const badLayer = await send({ payload: 'x', layer: 3 }).catch((e: Error) => e.message);
        return { chosen: untimed({ payload: chosen.payload, ranking: chosen.ranking, rwkv: chosen.rwkv }), embedded: embedded.payload, badLayer };
      });
    });

    it('rwkv-model in server mode: a server started after the deploy is used from the next message', async () => {
      // A free loopback port, then nothing listening on it.
      const probe = await serveOn(fakeEngine().engine);
      const url = probe.url;
      await probe.close();
      const mode = { modelNode: { id: 'm1', type: 'rwkv-model', engineMode: 'server', serverUrl: url }, modelCredentials: {} } as unknown as Mode;
      await load(mode, { type: 'rwkv-generate', maxTokens: '3' });
      await assert.rejects(send({ payload: 'hello' }), /is not reachable \(ECONNREFUSED\)/);
      const { engine } = fakeEngine();
      const server = await serveOn(engine, { port: Number(new URL(url).port) });
      try {
        const msg = await send({ payload: 'hello' });
        assert.strictEqual(msg.rwkv.usage.completionTokens, 3);
      } finally {
        await helper.unload();
        await server.close();
        await engine.close();
      }
    });

    it('rwkv-load-state: buffer, conversation file, list, unload', async () => {
      await inFlows(async (mode) => {
        await load(mode, { type: 'rwkv-load-state', operation: 'load', stateName: 'tuned' });
        const saved = await send({ operation: 'saveConversation', payload: 'User: hi\n\nAssistant: hello', file: 'chat.cbor' });
        assert.ok(fs.existsSync(path.join(mode.stateDir, 'chat.cbor')), `${mode.name}: file not in the engine's folder`);
        const bytes = fs.readFileSync(path.join(mode.stateDir, 'chat.cbor'));
        const fromBuffer = await send({ payload: bytes });
        const fromFile = await send({ operation: 'loadConversation', file: 'chat.cbor', name: 'chat' });
        const listed = await send({ operation: 'list' });
        const unloaded = await send({ operation: 'unload', name: 'tuned' });
        return [saved, fromBuffer, fromFile, listed, unloaded].map((m) => m.payload);
      });
    });
  });
});
