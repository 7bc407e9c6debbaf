// The Node-RED nodes and the n8n nodes on the real shared engine (acquireEngine, WebGPU; lavapipe on
// CI) with the tiny golden RWKV-7 model. Its vocabulary has 512 tokens, so prompts stay within
// digits and symbols; the point here is the mechanics (batching, streaming, cancellation, slot and
// lease release, states), not the text.

import { redeploy } from './node-red-redeploy';
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { IExecuteFunctions } from 'n8n-workflow';
import { sharedEngineCount } from '../engine/shared-engine';
import { releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import { RwkvChoose } from '../nodes/RwkvChoose/RwkvChoose.node';
import { RwkvEmbed } from '../nodes/RwkvEmbed/RwkvEmbed.node';
import { RwkvGenerate } from '../nodes/RwkvGenerate/RwkvGenerate.node';
import { RwkvLoadState } from '../nodes/RwkvLoadState/RwkvLoadState.node';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { RwkvChatModel } from '../nodes/n8n/rwkv-chat-model';
import { executeContext, type ContextOptions } from './nodes-n8n-context';
import { requireGolden } from './golden-required';
import { GOLDEN, REPO_ROOT } from './paths';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const helper = require('node-red-node-test-helper');
helper.init(require.resolve('node-red'));

type Msg = Record<string, any>;
const TINY = path.join(GOLDEN, 'v7-tiny.st');
/** Full World vocabulary (2 layers), for chat prompts whose "User:"/"Assistant:" tokens the tiny model lacks. */
const VOCAB_MODEL = path.join(GOLDEN, 'v7-vocab.pth');
const CREDENTIAL = { modelPath: TINY, precision: 'f32', maxBatch: 4, chunkSize: 0, cacheMiB: 0, stateDir: '', maxQueue: 0 };
const NODES = ['rwkv-model.js', 'rwkv-generate.js', 'rwkv-choose.js', 'rwkv-embed.js', 'rwkv-load-state.js'].map((f) =>
  require(path.join(REPO_ROOT, 'nodes', 'node-red', f)),
);
const MODEL = { id: 'm1', type: 'rwkv-model', modelPath: TINY, precision: 'f32', maxBatch: '4' };
const flowWith = (node: Msg, outputs = 1) => [
  MODEL,
  { id: 'n1', model: 'm1', wires: Array.from({ length: outputs }, (_, i) => [`out${i + 1}`]), ...node },
  ...Array.from({ length: outputs }, (_, i) => ({ id: `out${i + 1}`, type: 'helper' })),
];
const nextInput = (id: string) => new Promise<Msg>((resolve) => helper.getNode(id).once('input', resolve));
const nextError = (id: string) => new Promise<unknown>((resolve) => helper.getNode(id).once('call:error', (c: Msg) => resolve(c.args[0])));
const until = async (cond: () => boolean, what: string, ms = 60000) => {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), `timed out waiting for ${what}`);
};

describe('nodes on the real engine (tiny model)', function () {
  this.timeout(180000);
  // Engines other test files may hold in this process; ours must all be gone after each test.
  let othersEngines = 0;
  before(function () {
    requireGolden(this, TINY);
    setEngineProvider(undefined);
    othersEngines = sharedEngineCount();
  });

  describe('Node-RED', () => {
    before(() => helper.startServer());
    after(() => helper.stopServer());
    afterEach(async () => {
      await helper.unload();
      assert.strictEqual(sharedEngineCount(), othersEngines, 'engine still loaded after the flow stopped');
    });

    it('generates with progress status and streams tokens on output 2', async () => {
      await helper.load(NODES, flowWith({ type: 'rwkv-generate', maxTokens: '6', seed: '3', stream: true }, 2));
      const status: string[] = [];
      helper.getNode('n1').on('call:status', (c: Msg) => status.push(c.args[0].text));
      const pieces: string[] = [];
      helper.getNode('out2').on('input', (m: Msg) => pieces.push(m.payload));
      const out = nextInput('out1');
      helper.getNode('n1').receive({ payload: '1+1=' });
      const msg = await out;
      assert.strictEqual(msg.rwkv.usage.completionTokens, 6);
      assert.strictEqual(msg.rwkv.usage.promptTokens, 4);
      assert.strictEqual(msg.rwkv.finishReason, 'length');
      assert.strictEqual(pieces.join(''), msg.payload);
      await until(() => status.includes('done: 6 tokens (length)'), 'done status');
      assert.ok(status.some((s) => /^prefill \d+\/4$/.test(s)), status.join(' | '));
      assert.ok(status.some((s) => /^\d+ tokens$/.test(s)), status.join(' | '));
    });

    it('a redeploy during a long generation cancels it, frees the slot and unloads the model', async () => {
      await helper.load(NODES, flowWith({ type: 'rwkv-generate', maxTokens: '4000' }, 2));
      const sent: Msg[] = [];
      helper.getNode('out1').on('input', (m: Msg) => sent.push(m));
      let tokens = 0;
      helper.getNode('n1').on('call:status', (c: Msg) => {
        if (/tokens$/.test(c.args[0].text)) tokens++;
      });
      // End of text (token 0) banned: the random tiny model must not end the generation before the redeploy does.
      helper.getNode('n1').receive({ payload: '1+1=', logitBias: { entry: [{ kind: 'id', token: '0', bias: -100 }] } });
      await until(() => tokens >= 2, 'decoding');
      const started = Date.now();
      await redeploy(helper, [MODEL]);
      assert.ok(Date.now() - started < 10000, 'close took too long');
      assert.deepStrictEqual(sent, []);
      // The config node was redeployed too: a fresh request runs on a fresh slot.
      await redeploy(helper, flowWith({ type: 'rwkv-generate', maxTokens: '2' }, 2));
      const out = nextInput('out1');
      helper.getNode('n1').receive({ payload: '2+2=' });
      assert.strictEqual((await out).rwkv.usage.completionTokens, 2);
    });

    it('chooses, embeds, and reports an engine error (bad grammar) without crashing', async () => {
      await helper.load(NODES, [
        ...flowWith({ type: 'rwkv-choose', choices: '2\n3' }),
        { id: 'e1', type: 'rwkv-embed', model: 'm1', wires: [['out1']] },
        { id: 'g1', type: 'rwkv-generate', model: 'm1', constraint: 'grammar', grammar: 'start ::= (', wires: [['out1'], []] },
      ]);
      let out = nextInput('out1');
      helper.getNode('n1').receive({ payload: '1+1=' });
      const chosen = await out;
      assert.ok(['2', '3'].includes(chosen.payload));
      assert.strictEqual(chosen.ranking.length, 2);
      assert.ok(chosen.ranking[0].perplexity <= chosen.ranking[1].perplexity);

      out = nextInput('out1');
      helper.getNode('e1').receive({ payload: ['1+2', '3*4'] });
      const embedded = await out;
      assert.strictEqual(embedded.dimensions, 128);
      assert.strictEqual(embedded.payload.length, 2);
      assert.ok(embedded.payload[0].every((v: number) => Number.isFinite(v)));

      const err = nextError('g1');
      helper.getNode('g1').receive({ payload: '1' });
      assert.match(String(await err), /grammar/i);
    });

    it('saves a conversation state and generates from it after loading it', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-real-'));
      const file = 'conv.cbor'; // relative to the model's state folder
      const [, ...rest] = flowWith({ type: 'rwkv-load-state' });
      await helper.load(NODES, [
        { ...MODEL, stateDir: dir },
        ...rest,
        { id: 'g1', type: 'rwkv-generate', model: 'm1', maxTokens: '3', wires: [['out1'], []] },
      ]);
      let out = nextInput('out1');
      helper.getNode('n1').receive({ operation: 'saveConversation', payload: '1+1=2\n\n', file });
      const saved = (await out).payload;
      assert.strictEqual(saved.tokens > 0, true);
      assert.strictEqual(fs.statSync(path.join(dir, file)).size, saved.bytes);

      out = nextInput('out1');
      helper.getNode('n1').receive({ operation: 'loadConversation', file, name: 'conv' });
      assert.strictEqual((await out).payload.state.name, 'conv');

      out = nextInput('out1');
      helper.getNode('g1').receive({ payload: '2+2=', state: 'conv' });
      assert.strictEqual((await out).rwkv.usage.completionTokens, 3);
      fs.rmSync(dir, { recursive: true });
    });
  });

  describe('n8n execute()', () => {
    beforeEach(() => {
      process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    });
    afterEach(async () => {
      await releaseIdleEngines();
      delete process.env.RWKV_FLOW_IDLE_SECONDS;
      assert.strictEqual(sharedEngineCount(), othersEngines);
    });

    async function run(node: { execute?: unknown }, opts: ContextOptions) {
      const { ctx } = executeContext({ ...opts, credentials: opts.credentials ?? CREDENTIAL });
      const out = await (node.execute as (this: IExecuteFunctions) => Promise<{ json: Msg }[][]>).call(ctx);
      return out[0].map((o) => o.json);
    }

    it('RWKV Generate: three items submitted together, each complete', async () => {
      const out = await run(new RwkvGenerate(), {
        items: [{ json: {} }, { json: {} }, { json: {} }],
        params: { inputMode: 'prompt', prompt: (i: number) => `${i}+${i}=`, maxTokens: 4, constraint: 'none', options: { seed: 1 } },
      });
      assert.strictEqual(out.length, 3);
      for (const o of out) {
        assert.strictEqual(o.usage.completionTokens, 4);
        assert.strictEqual(typeof o.text, 'string');
      }
    });

    it('RWKV Generate: cancelling the execution stops the generation and releases the model', async () => {
      const cancel = new AbortController();
      // A random model ends its text by itself within a few hundred tokens; a grammar of one long literal
      // keeps end of text out of reach, so only the cancellation can stop this generation.
      // Streamed, so the cancellation comes once tokens are flowing (a fixed delay raced the generation once in CI:
      // the execution resolved instead of rejecting, and the log could not say when).
      const { ctx, chunks } = executeContext({
        credentials: CREDENTIAL,
        streaming: true,
        cancelSignal: cancel.signal,
        params: { inputMode: 'prompt', prompt: '1+1=', maxTokens: 4000, constraint: 'grammar', grammar: `root ::= "${'ab'.repeat(1500)}"`, options: {} },
      });
      const started = Date.now();
      const running = (new RwkvGenerate().execute as (this: IExecuteFunctions) => Promise<unknown>).call(ctx);
      await until(() => chunks.filter((c) => c.type === 'item').length >= 5, 'streamed tokens');
      cancel.abort();
      const outcome = await running.then(
        (r) => ({ resolved: r }),
        (e: Error) => ({ rejected: e }),
      );
      assert.ok('rejected' in outcome, `the execution ended without the cancellation after ${Date.now() - started} ms, ${chunks.length} chunks: ${JSON.stringify(outcome).slice(0, 300)}`);
      assert.match(outcome.rejected.message, /execution cancelled/);
    });

    it('RWKV Choose, RWKV Embed and RWKV Load State', async () => {
      const [choice] = await run(new RwkvChoose(), {
        params: { prompt: '1+1=', choicesMode: 'json', choicesJson: '["2", "3", "4"]', options: { calibrate: true } },
      });
      assert.strictEqual(choice.ranking.length, 3);
      assert.strictEqual(choice.choice, choice.ranking[0].choice);

      const [vector] = await run(new RwkvEmbed(), { params: { text: '1+2', options: { layer: 1 } } });
      assert.strictEqual(vector.embedding.length, 128);

      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-real-'));
      const file = 'c.cbor'; // relative to the credential's state folder
      const credentials = { ...CREDENTIAL, stateDir: dir };
      process.env.RWKV_FLOW_IDLE_SECONDS = '60'; // keep the engine (and its loaded states) between executions
      const [saved] = await run(new RwkvLoadState(), { params: { operation: 'saveConversation', prompt: '1+1=2', file, state: '' }, credentials });
      assert.ok(saved.bytes > 0);
      await run(new RwkvLoadState(), { params: { operation: 'loadConversation', file, name: 'c' }, credentials });
      const [listed] = await run(new RwkvLoadState(), { params: { operation: 'list' }, credentials });
      assert.deepStrictEqual(listed.states.map((s: Msg) => s.name), ['c']);
      fs.rmSync(dir, { recursive: true });
    });
  });

  describe('full-vocabulary model: chat prompts and JSON schema', () => {
    before(function () {
      requireGolden(this, VOCAB_MODEL);
      process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    });
    after(() => {
      delete process.env.RWKV_FLOW_IDLE_SECONDS;
      assert.strictEqual(sharedEngineCount(), othersEngines);
    });

    it('RWKV Generate: chat messages with a JSON schema give the parsed JSON', async () => {
      const { ctx } = executeContext({
        credentials: { ...CREDENTIAL, modelPath: VOCAB_MODEL },
        params: {
          inputMode: 'messages',
          messages: { message: [{ role: 'user', content: 'Is water wet? Answer in JSON.' }] },
          maxTokens: 20,
          constraint: 'jsonSchema',
          jsonSchema: '{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}',
          options: { seed: 4 },
        },
      });
      const [[item]] = await new RwkvGenerate().execute!.call(ctx);
      assert.strictEqual(typeof (item.json.json as { ok: unknown }).ok, 'boolean');
      assert.deepStrictEqual(item.json.json, JSON.parse(item.json.text as string));
      assert.strictEqual(item.json.finishReason, 'grammar');
    });

    it('RWKV Chat Model (AI sub-node) generates and streams a reply to chat messages', async () => {
      const model = new RwkvChatModel({ modelPath: VOCAB_MODEL, precision: 'f32', maxBatch: 2 }, { maxTokens: 6, seed: 1 });
      const messages = [
        { role: 'system' as const, content: [{ type: 'text', text: 'Be brief.' }] },
        { role: 'user' as const, content: [{ type: 'text', text: 'Hello there' }] },
      ];
      const result = await model.generate(messages);
      assert.strictEqual(result.usage!.completionTokens, 6);
      assert.strictEqual(result.finishReason, 'length');
      const deltas: string[] = [];
      let finish: unknown;
      for await (const chunk of model.stream(messages, { maxTokens: 4 })) {
        if (chunk.type === 'text-delta') deltas.push(chunk.delta);
        else finish = chunk;
      }
      assert.ok(deltas.length > 0);
      assert.deepStrictEqual((finish as { usage: { completionTokens: number } }).usage.completionTokens, 4);
    });
  });
});
