// Every n8n node's execute() on a fake engine injected through the engine-provider seam, through a
// stand-in IExecuteFunctions. The same nodes on the real engine: nodes-real-engine.test.ts.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { NodeHelpers, NodeOperationError, type INodeProperties, type INodeType } from 'n8n-workflow';
import { RwkvModelApi } from '../credentials/RwkvModelApi.credentials';
import { keptEngineCount, releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import { SAMPLER_OPTIONS } from '../nodes/n8n/option-properties';
import { RwkvChoose } from '../nodes/RwkvChoose/RwkvChoose.node';
import { RwkvEmbed } from '../nodes/RwkvEmbed/RwkvEmbed.node';
import { RwkvGenerate } from '../nodes/RwkvGenerate/RwkvGenerate.node';
import { RwkvLoadState } from '../nodes/RwkvLoadState/RwkvLoadState.node';
import { LmChatRwkv } from '../nodes/LmChatRwkv/LmChatRwkv.node';
import { EmbeddingsRwkv } from '../nodes/EmbeddingsRwkv/EmbeddingsRwkv.node';
import type { Message } from '../nodes/n8n/ai-node-sdk';
import { RwkvChatModel } from '../nodes/n8n/rwkv-chat-model';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { fakeBackendEngineProvider } from './fake-backend-engine';
import { FakeEngineProvider } from './nodes-fake-engine';
import { executeContext, type ContextOptions } from './nodes-n8n-context';

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ json: { i } }));

async function run(node: INodeType, opts: ContextOptions) {
  const { ctx, chunks } = executeContext(opts);
  const out = (await node.execute!.call(ctx)) as { json: Record<string, any>; pairedItem?: unknown }[][];
  return { out: out[0], chunks };
}

const GENERATE = { inputMode: 'prompt', maxTokens: 64, constraint: 'none', options: {} };

describe('n8n nodes (fake engine)', function () {
  let provider: FakeEngineProvider;

  beforeEach(() => {
    process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    provider = new FakeEngineProvider();
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await releaseIdleEngines();
    setEngineProvider(undefined);
    delete process.env.RWKV_FLOW_IDLE_SECONDS;
  });

  describe('RWKV Generate', () => {
    it('submits all items together and pairs each output with its item', async () => {
      provider.engine.options.tokenDelayMs = 10;
      const { out } = await run(new RwkvGenerate(), {
        items: items(3),
        params: { ...GENERATE, prompt: (i: number) => `prompt number ${i}` },
      });
      assert.strictEqual(provider.engine.maxActive, 3);
      assert.deepStrictEqual(out.map((o) => o.json.text), [' echo: prompt number 0', ' echo: prompt number 1', ' echo: prompt number 2']);
      assert.deepStrictEqual(out.map((o) => o.pairedItem), [{ item: 0 }, { item: 1 }, { item: 2 }]);
      assert.strictEqual(out[0].json.finishReason, 'stop');
      assert.deepStrictEqual(out[0].json.usage, { promptTokens: 15, completionTokens: 4, totalTokens: 19 });
      assert.strictEqual(provider.acquired, 1, 'one lease for the whole execution');
    });

    it('builds the RWKV chat prompt from the message list and options', async () => {
      await run(new RwkvGenerate(), {
        params: {
          ...GENERATE,
          inputMode: 'messages',
          messages: { message: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'Bye' }] },
          options: { system: 'Be kind.', temperature: 0.7, topP: 0.2, seed: 5, stop: '\\n\\nQ:', state: 'tuned' },
        },
      }).catch(() => undefined); // the fake has no state "tuned"; the request is what matters
      const req = provider.engine.requests[0];
      assert.strictEqual(req.prompt, 'System: Be kind.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: Bye\n\nAssistant:');
      assert.deepStrictEqual(req.stop, ['\n\nUser:', '\n\nAssistant:', '\n\nSystem:', '\n\nTool:', '\n\nQ:']);
      assert.deepStrictEqual(req.sampler, { temperature: 0.7, topP: 0.2, seed: 5 });
      assert.strictEqual(req.state, 'tuned');
    });

    it('reads chat messages from the item as JSON', async () => {
      const { out } = await run(new RwkvGenerate(), {
        params: { ...GENERATE, inputMode: 'messagesJson', messagesJson: [{ role: 'human', content: 'one two' }] },
      });
      assert.strictEqual(provider.engine.requests[0].prompt, 'User: one two\n\nAssistant:');
      assert.strictEqual(out[0].json.text, 'echo: one two Assistant:');
    });

    it('returns the parsed JSON for a JSON schema', async () => {
      const { out } = await run(new RwkvGenerate(), {
        params: { ...GENERATE, prompt: 'hello', constraint: 'jsonSchema', jsonSchema: '{"type":"object","properties":{"answer":{"type":"number"}}}' },
      });
      assert.deepStrictEqual(out[0].json.json, { answer: 5 });
    });

    it('with Continue On Fail, a bad schema fails only its own item', async () => {
      const { out } = await run(new RwkvGenerate(), {
        items: items(2),
        continueOnFail: true,
        params: { ...GENERATE, prompt: 'p', constraint: 'jsonSchema', jsonSchema: (i: number) => (i === 0 ? '{"type": 5}' : '{"type":"object"}') },
      });
      assert.match(out[0].json.error, /jsonSchema: is not a valid JSON Schema/);
      assert.deepStrictEqual(out[1].json.json, { answer: 1 });
      assert.deepStrictEqual(out.map((o) => o.pairedItem), [{ item: 0 }, { item: 1 }]);
    });

    it('without Continue On Fail, the first failure fails the node and cancels the other items', async () => {
      provider.engine.options.tokenDelayMs = 20;
      await assert.rejects(
        run(new RwkvGenerate(), {
          items: items(3),
          params: { ...GENERATE, prompt: (i: number) => (i === 1 ? '' : 'a long prompt with quite a few words'), maxTokens: 64 },
        }),
        (err: NodeOperationError) => {
          assert.ok(err instanceof NodeOperationError);
          assert.match(err.message, /prompt: is empty/);
          assert.strictEqual(err.context.itemIndex, 1);
          return true;
        },
      );
      assert.strictEqual(provider.engine.active, 0);
      assert.strictEqual(provider.engine.aborted, 2);
    });

    it('cancelling the execution aborts running generations and frees their slots', async () => {
      provider.engine.options.tokenDelayMs = 20;
      const cancel = new AbortController();
      const running = run(new RwkvGenerate(), {
        items: items(2),
        cancelSignal: cancel.signal,
        params: { ...GENERATE, prompt: 'many many words here to echo slowly' },
      });
      setTimeout(() => cancel.abort(), 30);
      await assert.rejects(running, /execution cancelled/);
      assert.strictEqual(provider.engine.active, 0);
      assert.strictEqual(provider.engine.aborted, 2);
    });

    it('streams text chunks per item when n8n streams the response', async () => {
      const { out, chunks } = await run(new RwkvGenerate(), { streaming: true, params: { ...GENERATE, prompt: 'one two' } });
      assert.deepStrictEqual(chunks, [
        { type: 'begin', itemIndex: 0, content: undefined },
        { type: 'item', itemIndex: 0, content: ' echo:' },
        { type: 'item', itemIndex: 0, content: ' one' },
        { type: 'item', itemIndex: 0, content: ' two' },
        { type: 'end', itemIndex: 0, content: undefined },
      ]);
      assert.strictEqual(out[0].json.text, ' echo: one two');
    });

    it('ends a failed stream with an error chunk', async () => {
      provider.engine.options.tokenDelayMs = 20;
      const cancel = new AbortController();
      const { ctx, chunks } = executeContext({ streaming: true, cancelSignal: cancel.signal, params: { ...GENERATE, prompt: 'a b c d e f g' } });
      setTimeout(() => cancel.abort(), 50);
      await assert.rejects(new RwkvGenerate().execute!.call(ctx), /execution cancelled/);
      assert.strictEqual(chunks[0].type, 'begin');
      assert.deepStrictEqual(chunks[chunks.length - 1], { type: 'error', itemIndex: 0, content: 'generation cancelled' });
    });

    it('does not stream when the option is off or n8n is not streaming', async () => {
      let r = await run(new RwkvGenerate(), { streaming: true, params: { ...GENERATE, prompt: 'x', options: { enableStreaming: false } } });
      assert.deepStrictEqual(r.chunks, []);
      r = await run(new RwkvGenerate(), { streaming: false, params: { ...GENERATE, prompt: 'x' } });
      assert.deepStrictEqual(r.chunks, []);
    });

    it('reports a bad credential as a node error', async () => {
      await assert.rejects(
        run(new RwkvGenerate(), { params: { ...GENERATE, prompt: 'x' }, credentials: { precision: 'f64' } }),
        /RWKV Model credential: precision: must be "f16", "f32", "int8" or "nf4"/,
      );
      assert.strictEqual(provider.acquired, 0);
    });

    it('passes the credential to the engine with 0 meaning engine default', async () => {
      await run(new RwkvGenerate(), {
        params: { ...GENERATE, prompt: 'x' },
        credentials: { modelPath: ' /m.st ', precision: 'f32', maxBatch: 8, chunkSize: 0, cacheMiB: 1, stateDir: '/s', maxQueue: 0 },
      });
      assert.deepStrictEqual(provider.configs[0], { modelPath: '/m.st', precision: 'f32', maxBatch: 8, cacheBytes: 1048576, stateDir: '/s' });
    });

    it('passes Quantised Layers with int8 and nf4 (0 = all layers), shown only for them, and ignores a value left from them under f16', async () => {
      const field = new RwkvModelApi().properties.find((p) => p.name === 'quantLayers')!;
      assert.ok(field.description && /first/.test(field.description) && /0 = every layer/.test(field.description), 'the field says what it counts');
      const shown = (precision: string) => NodeHelpers.displayParameter({ precision } as never, field, { typeVersion: 1 }, new RwkvGenerate().description);
      assert.deepStrictEqual(['f16', 'f32', 'int8', 'nf4'].map(shown), [false, false, true, true]);
      for (const [credentials, quantLayers] of [
        [{ precision: 'int8', quantLayers: 3 }, 3],
        [{ precision: 'nf4', quantLayers: 1 }, 1],
        [{ precision: 'int8', quantLayers: 0 }, undefined],
        [{ precision: 'f16', quantLayers: 5 }, undefined],
      ] as const) {
        await run(new RwkvGenerate(), { params: { ...GENERATE, prompt: 'x' }, credentials });
        assert.strictEqual(provider.configs.at(-1)!.quantLayers, quantLayers, JSON.stringify(credentials));
      }
      await assert.rejects(
        run(new RwkvGenerate(), { params: { ...GENERATE, prompt: 'x' }, credentials: { precision: 'int8', quantLayers: 2.5 } }),
        /RWKV Model credential: quantLayers: must be an integer ≥ 0, got 2.5/,
      );
    });

    it('passes the operator limits of the credential; a request deadline of 0 means none', async () => {
      await run(new RwkvGenerate(), {
        params: { ...GENERATE, prompt: 'x' },
        credentials: { precision: 'f16', maxTokensLimit: 512, requestTimeoutSeconds: 0, maxStates: 0 },
      });
      assert.deepStrictEqual(provider.configs[0], { precision: 'f16', maxTokensLimit: 512, requestTimeoutMs: 0 });
    });

    it('an item cannot go beyond the max-tokens limit of the credential', async () => {
      const real = fakeBackendEngineProvider();
      setEngineProvider(real.provide);
      const { out } = await run(new RwkvGenerate(), {
        items: items(2),
        continueOnFail: true,
        params: { ...GENERATE, prompt: 'hi', maxTokens: (i: number) => (i === 0 ? 1_048_576 : 8) },
        credentials: { precision: 'f16', maxTokensLimit: 8 },
      });
      assert.match(out[0].json.error, /maxTokens 1048576 is above this model's limit of 8/);
      assert.strictEqual(out[1].json.usage.completionTokens, 8);
    });

    it('a batch of many items warns of no listener leak: every item listens on the execution’s one signal by design', async () => {
      // Scheduled batch generation: 40 items, each request listening on the shared cancel signal. Node would print
      // "MaxListenersExceededWarning: Possible EventTarget memory leak" into n8n's log on every such run.
      const real = fakeBackendEngineProvider();
      setEngineProvider(real.provide);
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
      process.on('warning', onWarning);
      try {
        const { out } = await run(new RwkvGenerate(), { items: items(40), params: { ...GENERATE, prompt: 'hi', maxTokens: 2 } });
        assert.strictEqual(out.length, 40);
        await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
      } finally {
        process.off('warning', onWarning);
      }
      assert.deepStrictEqual(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')), []);
    });

    it('ends a generation past the deadline of the credential with a timeout error', async () => {
      const real = fakeBackendEngineProvider({ slots: 1, delayMs: 2 });
      setEngineProvider(real.provide);
      await assert.rejects(
        run(new RwkvGenerate(), {
          params: { ...GENERATE, prompt: 'hi', maxTokens: 100_000 },
          credentials: { precision: 'f16', maxTokensLimit: 100_000, requestTimeoutSeconds: 0.1 },
        }),
        /ran past the 100 ms deadline/,
      );
      assert.strictEqual(real.engines[0].scheduler.active, 0);
    });
  });

  describe('credential Test button', () => {
    it('is declared for the RWKV Model credential and reports what loaded where', async () => {
      const node = new RwkvChoose();
      const cred = node.description.credentials!.find((c) => c.name === 'rwkvModelApi')!;
      const test = (node as unknown as { methods: { credentialTest: Record<string, Function> } }).methods.credentialTest[cred.testedBy as string];
      const ok = await test({ id: 'c', name: 'RWKV', type: 'rwkvModelApi', data: { modelPath: '', precision: 'f16' } });
      assert.deepStrictEqual(ok, { status: 'OK', message: 'Loaded the bundled default model: RWKV v7, 3 layers × 8, vocabulary 512, on fake' });
      provider.failWith = new Error('model file not found: /models/missing.st');
      const bad = await test({ id: 'c', name: 'RWKV', type: 'rwkvModelApi', data: { modelPath: '/models/missing.st', maxBatch: 2 } });
      assert.deepStrictEqual(bad, { status: 'Error', message: 'model file not found: /models/missing.st' });
    });
  });

  describe('engine lease across executions', () => {
    it('keeps the model loaded between executions and releases it when idle', async () => {
      process.env.RWKV_FLOW_IDLE_SECONDS = '0.05';
      await run(new RwkvGenerate(), { params: { ...GENERATE, prompt: 'x' } });
      await run(new RwkvEmbed(), { params: { text: 'y', options: {} } });
      assert.strictEqual(provider.acquired, 1);
      assert.strictEqual(provider.held, 1);
      assert.strictEqual(keptEngineCount(), 1);
      await new Promise((r) => setTimeout(r, 120));
      assert.strictEqual(provider.held, 0);
      assert.strictEqual(keptEngineCount(), 0);
    });

    it("takes a relative model path in the credential inside n8n's user folder", async () => {
      process.env.N8N_USER_FOLDER = '/srv/n8n';
      try {
        await run(new RwkvEmbed(), { params: { text: 'y', options: {} }, credentials: { modelPath: 'models/m.st' } });
      } finally {
        delete process.env.N8N_USER_FOLDER;
      }
      assert.strictEqual(provider.configs[0].modelPath, '/srv/n8n/.n8n/models/m.st');
    });

    it('an edited credential for the same model releases the idle engine of the old settings at once', async () => {
      process.env.RWKV_FLOW_IDLE_SECONDS = '600';
      await run(new RwkvEmbed(), { params: { text: 'y', options: {} }, credentials: { modelPath: '/m.st', maxBatch: 4 } });
      assert.strictEqual(provider.held, 1);
      await run(new RwkvEmbed(), { params: { text: 'y', options: {} }, credentials: { modelPath: '/m.st', maxBatch: 8 } });
      assert.strictEqual(provider.acquired, 2);
      assert.strictEqual(provider.held, 1, 'the engine of the old settings is still held');
      assert.strictEqual(keptEngineCount(), 1);
      // Another model's idle engine is not touched.
      await run(new RwkvEmbed(), { params: { text: 'y', options: {} }, credentials: { modelPath: '/other.st' } });
      assert.strictEqual(provider.held, 2);
    });

    it('does not keep a model that failed to load', async () => {
      provider.failWith = new Error('model file not found: /models/tiny.st');
      await assert.rejects(run(new RwkvEmbed(), { params: { text: 'y', options: {} } }), /model file not found/);
      assert.strictEqual(keptEngineCount(), 0);
    });
  });

  describe('RWKV Choose', () => {
    it('ranks the listed choices', async () => {
      const { out } = await run(new RwkvChoose(), {
        params: { prompt: 'the dog barked', choicesMode: 'list', choices: { choice: [{ text: 'cat' }, { text: 'dog' }] }, options: { calibrate: true } },
      });
      assert.strictEqual(out[0].json.choice, 'dog');
      assert.strictEqual(out[0].json.index, 1);
      assert.strictEqual(out[0].json.ranking.length, 2);
      assert.ok(out[0].json.ranking[0].perplexity <= out[0].json.ranking[1].perplexity);
    });

    it('takes choices from the item and reports bad ones per item', async () => {
      const { out } = await run(new RwkvChoose(), {
        items: items(2),
        continueOnFail: true,
        params: { prompt: 'yes', choicesMode: 'json', choicesJson: (i: number) => (i === 0 ? '["no","yes"]' : ['only']), options: {} },
      });
      assert.strictEqual(out[0].json.choice, 'yes');
      assert.match(out[1].json.error, /choices: needs at least two choices, got 1/);
    });
  });

  describe('RWKV Embed', () => {
    it('returns one vector per item', async () => {
      const { out } = await run(new RwkvEmbed(), { items: items(2), params: { text: (i: number) => `text ${i}`, options: { layer: 2 } } });
      assert.strictEqual(out.length, 2);
      assert.strictEqual(out[0].json.dimensions, 8);
      assert.strictEqual(out[0].json.embedding.length, 8);
      assert.notDeepStrictEqual(out[0].json.embedding, out[1].json.embedding);
    });

    it('rejects a layer beyond the model', async () => {
      await assert.rejects(run(new RwkvEmbed(), { params: { text: 'x', options: { layer: 9 } } }), /layer: must be below the model's 3 layers/);
    });
  });

  describe('RWKV Load State', () => {
    // File paths are relative to the credential's state folder.
    const inFolder = (stateDir: string) => ({ modelPath: '/models/tiny.st', precision: 'f16', maxBatch: 0, chunkSize: 0, cacheMiB: 0, stateDir, maxQueue: 0 });

    it('loads from binary data and from a path, lists and unloads', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-n8n-'));
      const file = 's.st';
      fs.writeFileSync(path.join(dir, file), Buffer.alloc(10));
      let { out } = await run(new RwkvLoadState(), {
        params: { operation: 'load', name: 'a', sourceType: 'binary', binaryPropertyName: 'data' },
        binary: { '0:data': Buffer.from([1, 2, 3, 4]) },
      });
      assert.deepStrictEqual(out[0].json, { operation: 'load', state: { name: 'a', source: 'buffer', bytes: 4 } });
      ({ out } = await run(new RwkvLoadState(), {
        params: { operation: 'load', name: 'b', sourceType: 'path', source: file },
        credentials: inFolder(dir),
      }));
      assert.deepStrictEqual(out[0].json.state, { name: 'b', source: file, bytes: 10 });
      ({ out } = await run(new RwkvLoadState(), { params: { operation: 'list' } }));
      assert.deepStrictEqual(out[0].json.states.map((s: { name: string }) => s.name), ['a', 'b']);
      ({ out } = await run(new RwkvLoadState(), { params: { operation: 'unload', name: 'a' } }));
      assert.deepStrictEqual(out[0].json.states.map((s: { name: string }) => s.name), ['b']);
      fs.rmSync(dir, { recursive: true });
    });

    it('saves and loads a conversation', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-n8n-'));
      const file = 'c.cbor';
      const credentials = inFolder(dir);
      let { out } = await run(new RwkvLoadState(), { params: { operation: 'saveConversation', prompt: 'User: hi', file, state: '' }, credentials });
      assert.deepStrictEqual(out[0].json, { operation: 'saveConversation', file, bytes: 8, tokens: 8 });
      assert.ok(fs.existsSync(path.join(dir, file)));
      ({ out } = await run(new RwkvLoadState(), { params: { operation: 'loadConversation', file, name: 'chat' }, credentials }));
      assert.strictEqual(out[0].json.state.name, 'chat');
      fs.rmSync(dir, { recursive: true });
    });

    it('names the missing parameter', async () => {
      await assert.rejects(run(new RwkvLoadState(), { params: { operation: 'unload', name: ' ' } }), /name: is required for this operation/);
    });
  });

  describe('RWKV Chat Model (AI sub-node)', () => {
    const text = (role: Message['role'], t: string): Message => ({ role, content: [{ type: 'text', text: t }] });
    const model = () => new RwkvChatModel({ modelPath: '/models/chat.st' }, { maxTokens: 50, temperature: 0.5, samplerKind: 'typical' });

    it('generates a reply to SDK messages in the RWKV dialogue format', async () => {
      const result = await model().generate([text('system', 'Be brief.'), text('user', 'Hi there'), text('assistant', 'Hello.'), text('user', 'Bye now')], {
        maxTokens: 20,
        topP: 0.3,
        stopSequences: ['END'],
      });
      const req = provider.engine.requests[0];
      assert.strictEqual(req.prompt, 'System: Be brief.\n\nUser: Hi there\n\nAssistant: Hello.\n\nUser: Bye now\n\nAssistant:');
      assert.strictEqual(req.maxTokens, 20);
      assert.deepStrictEqual(req.stop, ['\n\nUser:', '\n\nAssistant:', '\n\nSystem:', '\n\nTool:', 'END']);
      assert.deepStrictEqual(req.sampler, { kind: 'typical', temperature: 0.5, topP: 0.3 });
      assert.deepStrictEqual(result.message, { role: 'assistant', content: [{ type: 'text', text: 'echo: Bye now Assistant:' }] });
      assert.strictEqual(result.finishReason, 'stop');
      assert.strictEqual(result.usage!.completionTokens, 4);
    });

    it('streams text deltas without the leading space, then finish with usage', async () => {
      const chunks = [];
      for await (const c of model().stream([text('user', 'one two')], { maxTokens: 3, stop: [] })) chunks.push(c);
      assert.deepStrictEqual(chunks, [
        { type: 'text-delta', delta: 'echo:' },
        { type: 'text-delta', delta: ' one' },
        { type: 'text-delta', delta: ' two' },
        { type: 'finish', finishReason: 'length', usage: { promptTokens: 25, completionTokens: 3, totalTokens: 28 } },
      ]);
      assert.strictEqual(provider.held, 0, 'the stream did not give the engine back');
    });

    it('passes the AI node abort signal to the engine', async () => {
      provider.engine.options.tokenDelayMs = 20;
      const abort = new AbortController();
      const running = model().generate([text('user', 'many words to echo slowly here')], { signal: abort.signal });
      setTimeout(() => abort.abort(), 30);
      await assert.rejects(running, /generation cancelled/);
      assert.strictEqual(provider.engine.active, 0);
    });

    it('an agent without tools gets the same model; tools are bound (chat-tools.test.ts)', () => {
      const m = model();
      assert.strictEqual(m.withTools([]), m);
      assert.notStrictEqual(m.withTools([{ name: 'calculator' }]), m);
    });

    it('the reply ends at any next role line, not only the user\'s', async () => {
      provider.engine.options.reply = () => ' Fine.\n\nAssistant: and more\n\nUser: x';
      const result = await model().generate([text('user', 'How are you?')]);
      assert.deepStrictEqual(result.message.content, [{ type: 'text', text: 'Fine.' }]);
    });

    it('rejects a tool message without a result and non-text content naming the message', async () => {
      await assert.rejects(model().generate([{ role: 'tool', content: [{ type: 'text' }] }]), /messages\[0\]: a tool message needs a tool-result/);
      await assert.rejects(model().generate([{ role: 'user', content: [{ type: 'file' }] }]), /messages\[0\]: content of type "file" is not supported/);
    });

    it('supplyData explains when n8n has no AI node SDK', async () => {
      const { ctx } = executeContext({ params: { maxTokens: 10, options: {} } });
      await assert.rejects(new LmChatRwkv().supplyData!.call(ctx as never, 0), /needs an n8n version with the AI node SDK/);
    });

    it('is an AI language-model sub-node', () => {
      const d = new LmChatRwkv().description;
      assert.deepStrictEqual(d.inputs, []);
      assert.deepStrictEqual(d.outputs, ['ai_languageModel']);
    });
  });

  describe('descriptions', () => {
    const nodes: INodeType[] = [new RwkvGenerate(), new RwkvChoose(), new RwkvEmbed(), new RwkvLoadState(), new LmChatRwkv(), new EmbeddingsRwkv()];

    it('use the RWKV Model credential, which declares every model setting', () => {
      const credential = new RwkvModelApi();
      for (const node of nodes) {
        const [only, ...more] = node.description.credentials!;
        assert.deepStrictEqual(more, []);
        assert.deepStrictEqual({ name: only.name, required: only.required }, { name: credential.name, required: true });
      }
      // One node's testedBy gives the credential dialog its Test button (n8n looks across all node types).
      assert.ok(nodes.some((n) => n.description.credentials![0].testedBy === 'rwkvModelApiTest'));
      assert.deepStrictEqual(
        credential.properties.map((p) => p.name).sort(),
        [
          'apiKey', 'cacheMiB', 'chunkSize', 'decodeKeep', 'defaultState', 'device', 'drawSteps', 'engineMode', 'maxBatch', 'maxContext', 'maxQueue', 'maxStates',
          'maxTokensLimit', 'modelPath', 'precision', 'prefillChunkSize', 'quantLayers', 'requestTimeoutSeconds', 'serverUrl', 'stateDir',
        ],
      );
    });

    it("sampler options: each described with its range, and a sampler's own settings shown only for it", () => {
      const node = new RwkvGenerate();
      const options = node.description.properties.find((p) => p.name === 'options')!.options as INodeProperties[];
      const sampler = options.filter((o) => SAMPLER_OPTIONS.includes(o));
      assert.strictEqual(sampler.length, SAMPLER_OPTIONS.length);
      for (const o of sampler) assert.ok(o.description && o.description.length > 20, `${o.displayName} has no description`);
      // n8n's own visibility rule, evaluated on the options collection's values as its editor does.
      const shown = (values: Record<string, unknown>) =>
        sampler.filter((o) => NodeHelpers.displayParameter(values as never, o, { typeVersion: 1 }, node.description)).map((o) => o.name);
      for (const [kind, mine, others] of [
        [undefined, ['topP'], ['tau', 'mirostatTau', 'mirostatEta']],
        ['typical', ['tau', 'topK', 'minP'], ['topP', 'mirostatTau']],
        ['mirostat', ['mirostatTau', 'mirostatEta'], ['topP', 'topK', 'tau', 'minP']],
      ] as const) {
        const names = shown(kind ? { samplerKind: kind } : {});
        for (const n of mine) assert.ok(names.includes(n), `${n} hidden for ${kind ?? 'the default sampler'}`);
        for (const n of others) assert.ok(!names.includes(n), `${n} shown for ${kind ?? 'the default sampler'}`);
        for (const n of ['temperature', 'presencePenalty', 'seed']) assert.ok(names.includes(n));
      }
    });

    it('canvas subtitles read as words, not internal values', () => {
      const node = new RwkvLoadState();
      const operation = node.description.properties.find((p) => p.name === 'operation')!;
      for (const option of operation.options as { name: string; value: string }[]) {
        // n8n evaluates the subtitle as an expression with $parameter bound to the node's parameters.
        const subtitle = new Function('$parameter', `return ${node.description.subtitle!.slice(3, -2)}`)({ operation: option.value });
        assert.strictEqual(subtitle, option.name);
      }
    });

    it('have unique names and file icons that exist relative to the compiled node', () => {
      assert.strictEqual(new Set(nodes.map((n) => n.description.name)).size, nodes.length);
      for (const node of nodes) {
        const icon = String(node.description.icon);
        assert.match(icon, /^file:.+\.svg$/);
        const compiledDir = path.join(__dirname, '..', 'nodes', node.constructor.name);
        assert.ok(fs.existsSync(path.resolve(compiledDir, icon.slice(5))), `${icon} missing for ${node.description.name}`);
      }
    });
  });
});
