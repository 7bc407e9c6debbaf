// The host-agnostic glue both adapters use: parameter coercion, chat formatting, request
// preparation and their error messages.

import * as assert from 'assert';
import {
  decodeEscapes,
  formatChatPrompt,
  optionalStringList,
  parseChatMessages,
  parseChoices,
  parseModelConfig,
  prepareEmbed,
  prepareGenerate,
  prepareStateOperation,
  ProgressTracker,
} from '../nodes/shared';

describe('nodes/shared', () => {
  describe('coercion', () => {
    it('decodes the escapes an editor field cannot hold', () => {
      assert.strictEqual(decodeEscapes('a\\n\\nb\\tc\\\\n\\u00e9'), 'a\n\nb\tc\\né');
    });

    it('reads stop lists from arrays, JSON text and single strings', () => {
      assert.deepStrictEqual(optionalStringList('stop', ['a', 'b']), ['a', 'b']);
      assert.deepStrictEqual(optionalStringList('stop', '["\\n\\n", "###"]'), ['\n\n', '###']);
      assert.deepStrictEqual(optionalStringList('stop', '\\n\\nUser:'), ['\n\nUser:']);
      assert.strictEqual(optionalStringList('stop', '  '), undefined);
      assert.throws(() => optionalStringList('stop', '[oops'), /stop: looks like a JSON array but does not parse/);
      assert.throws(() => optionalStringList('stop', [1]), /stop: must be a string or an array of strings/);
      assert.throws(() => optionalStringList('stop', ['']), /stop: must not contain empty strings/);
    });
  });

  describe('model configuration', () => {
    it("takes a relative model path and state folder inside the host's folder, not the working directory", () => {
      assert.deepStrictEqual(parseModelConfig({ modelPath: 'models/m.st', stateDir: 'states' }, '/home/u/.node-red'), {
        modelPath: '/home/u/.node-red/models/m.st',
        stateDir: '/home/u/.node-red/states',
      });
      assert.deepStrictEqual(parseModelConfig({ modelPath: '/abs/m.st' }, '/home/u/.node-red'), { modelPath: '/abs/m.st' });
    });

    it('maps editor fields to EngineConfig, blanks to engine defaults', () => {
      assert.deepStrictEqual(parseModelConfig({ modelPath: ' m.st ', precision: 'f32', maxBatch: '8', chunkSize: '', cacheMiB: '0.5', stateDir: '', maxQueue: '0' }), {
        modelPath: 'm.st',
        precision: 'f32',
        maxBatch: 8,
        cacheBytes: 524288,
        maxQueue: 0,
      });
      assert.deepStrictEqual(parseModelConfig({}), {});
      assert.deepStrictEqual(parseModelConfig({ chunkSize: '64', prefillChunkSize: '1024', decodeKeep: '0.8', drawSteps: '8' }), {
        chunkSize: 64,
        prefillChunkSize: 1024,
        decodeKeep: 0.8,
        drawSteps: 8,
      });
      assert.deepStrictEqual(parseModelConfig({ drawSteps: 0 }), { drawSteps: 0 });
    });

    it('names the bad field', () => {
      assert.throws(() => parseModelConfig({ maxBatch: '2.5' }), /maxBatch: must be an integer ≥ 1, got "2.5"/);
      assert.throws(() => parseModelConfig({ chunkSize: 'lots' }), /chunkSize: must be a number, got "lots"/);
      assert.throws(() => parseModelConfig({ cacheMiB: -1 }), /cacheMiB: must be ≥ 0/);
      assert.throws(() => parseModelConfig({ decodeKeep: 1 }), /decodeKeep: must be between 0 and 1/);
      assert.throws(() => parseModelConfig({ drawSteps: 17 }), /drawSteps: must be at most 16, got 17/);
      assert.throws(() => parseModelConfig({ drawSteps: '2.5' }), /drawSteps: must be an integer ≥ 0/);
      assert.throws(() => parseModelConfig({ prefillChunkSize: 0 }), /prefillChunkSize: must be an integer ≥ 1/);
      assert.throws(() => parseModelConfig({ modelPath: 5 }), /modelPath: must be a string/);
      assert.throws(() => parseModelConfig({ maxTokensLimit: '0' }), /maxTokensLimit: must be an integer ≥ 1/);
      assert.throws(() => parseModelConfig({ maxTokensLimit: 2 ** 21 }), /maxTokensLimit: must be at most 1048576/);
      assert.throws(() => parseModelConfig({ requestTimeoutSeconds: '-1' }), /requestTimeoutSeconds: must be between 0 \(no deadline\)/);
      assert.throws(() => parseModelConfig({ requestTimeoutSeconds: 1e9 }), /requestTimeoutSeconds: must be between 0/);
      assert.throws(() => parseModelConfig({ maxStates: '-2' }), /maxStates: must be an integer ≥ 0/);
      assert.throws(() => parseModelConfig({ maxContext: '0' }), /maxContext: must be an integer ≥ 1/);
      assert.throws(() => parseModelConfig({ maxContext: String(2 ** 21) }), /maxContext: must be at most 1048576, got 2097152/);
      assert.deepStrictEqual(parseModelConfig({ maxContext: '8192' }), { maxContext: 8192 });
    });

    it('maps the operator limits: seconds to ms, 0 = no deadline, blanks to engine defaults', () => {
      assert.deepStrictEqual(parseModelConfig({ maxTokensLimit: '1024', requestTimeoutSeconds: '2.5', maxStates: '8' }), {
        maxTokensLimit: 1024,
        requestTimeoutMs: 2500,
        maxStates: 8,
      });
      assert.deepStrictEqual(parseModelConfig({ requestTimeoutSeconds: '0' }), { requestTimeoutMs: 0 });
      assert.deepStrictEqual(parseModelConfig({ maxTokensLimit: '', requestTimeoutSeconds: '', maxStates: '' }), {});
    });

    it('server mode: the server\'s URL and key, nothing of the local engine settings', () => {
      assert.deepStrictEqual(parseModelConfig({ engineMode: 'server', serverUrl: ' http://127.0.0.1:8720 ', apiKey: 'k', maxBatch: '8' }), {
        server: { url: 'http://127.0.0.1:8720', apiKey: 'k' },
      });
      assert.deepStrictEqual(parseModelConfig({ engineMode: 'server', serverUrl: 'https://gpu.example/rwkv', apiKey: '' }), { server: { url: 'https://gpu.example/rwkv' } });
      assert.deepStrictEqual(parseModelConfig({ engineMode: 'process', maxBatch: '2', serverUrl: 'http://x' }), { maxBatch: 2 });
      assert.throws(() => parseModelConfig({ engineMode: 'server' }), /serverUrl: is required when the engine runs on a server/);
      assert.throws(() => parseModelConfig({ engineMode: 'server', serverUrl: 'file:///etc/passwd' }), /serverUrl: must start with http:\/\/ or https:\/\//);
      assert.throws(() => parseModelConfig({ engineMode: 'server', serverUrl: 'not a url' }), /serverUrl: is not a URL/);
      assert.throws(() => parseModelConfig({ engineMode: 'cloud' }), /engineMode: must be "process" or "server"/);
    });
  });

  describe('chat prompt', () => {
    it('formats turns, folds blank lines inside a message, ends with the assistant cue', () => {
      const messages = parseChatMessages('messages', [
        { role: 'developer', content: 'Rules:\n\n1. be kind' },
        { role: 'human', content: '  hi  ' },
        { role: 'ai', content: 'hello' },
        { role: 'user', content: 'a\r\n\r\n\r\nb' },
      ]);
      assert.strictEqual(formatChatPrompt(messages), 'System: Rules:\n1. be kind\n\nUser: hi\n\nAssistant: hello\n\nUser: a\nb\n\nAssistant:');
    });

    it('rejects what is not a message list, naming the element', () => {
      assert.throws(() => parseChatMessages('messages', []), /messages: must be a non-empty array/);
      assert.throws(() => parseChatMessages('messages', '{'), /messages: is not valid JSON/);
      assert.throws(() => parseChatMessages('messages', [{ role: 'bot', content: 'x' }]), /messages\[0\]\.role: must be "system", "user", "assistant" or "tool", got "bot"/);
      assert.throws(() => parseChatMessages('messages', [{ role: 'user', content: 3 }]), /messages\[0\]\.content: must be a string/);
    });
  });

  describe('generate request', () => {
    it('builds a completion request with sampler fields over a sampler object', () => {
      const { request, chat } = prepareGenerate({ prompt: 'Hi', maxTokens: '5', sampler: '{"topK": 3, "temperature": 2}', temperature: '0.5', samplerKind: 'mirostat', state: ' s ' });
      assert.strictEqual(chat, false);
      assert.deepStrictEqual(request, { prompt: 'Hi', maxTokens: 5, sampler: { topK: 3, temperature: 0.5, kind: 'mirostat' }, state: 's' });
    });

    it('adds the system prompt unless the messages have one', () => {
      assert.match(prepareGenerate({ messages: [{ role: 'user', content: 'x' }], system: 'S' }).request.prompt, /^System: S\n\nUser: x/);
      assert.match(prepareGenerate({ messages: [{ role: 'system', content: 'A' }, { role: 'user', content: 'x' }], system: 'S' }).request.prompt, /^System: A\n\nUser: x/);
    });

    it('refuses conflicting or missing inputs', () => {
      assert.throws(() => prepareGenerate({}), /prompt: is empty/);
      assert.throws(() => prepareGenerate({ prompt: 'a', messages: [{ role: 'user', content: 'b' }] }), /either a prompt or chat messages/);
      assert.throws(() => prepareGenerate({ prompt: 'a', grammar: 'x', jsonSchema: {} }), /either a grammar or a JSON schema/);
      assert.throws(() => prepareGenerate({ prompt: 'a', samplerKind: 'greedy' }), /samplerKind: must be one of nucleus, typical, mirostat/);
      assert.throws(() => prepareGenerate({ prompt: 'a', maxTokens: 0 }), /maxTokens: must be an integer ≥ 1/);
    });

    it('checks JSON schemas, draft-07 and 2020-12, including $refs', () => {
      const ok2020 = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', prefixItems: [{ type: 'string' }] };
      assert.deepStrictEqual(prepareGenerate({ prompt: 'a', jsonSchema: ok2020 }).request.jsonSchema, ok2020);
      assert.throws(() => prepareGenerate({ prompt: 'a', jsonSchema: { type: 'objekt' } }), /jsonSchema: is not a valid JSON Schema/);
      // Each schema is checked against its own draft: draft-04's boolean exclusiveMinimum is valid there.
      const draft04 = { $schema: 'http://json-schema.org/draft-04/schema#', type: 'number', minimum: 0, exclusiveMinimum: true };
      assert.doesNotThrow(() => prepareGenerate({ prompt: 'a', jsonSchema: draft04 }));
      assert.throws(() => prepareGenerate({ prompt: 'a', jsonSchema: { ...draft04, $schema: 'https://json-schema.org/draft/2020-12/schema' } }), /jsonSchema: is not a valid JSON Schema/);
      // References are resolved when the engine compiles the schema (in its worker), not on the host's event loop.
      assert.doesNotThrow(() => prepareGenerate({ prompt: 'a', jsonSchema: { $ref: '#/definitions/missing' } }));
      assert.throws(() => prepareGenerate({ prompt: 'a', jsonSchema: '[1]' }), /jsonSchema: must be a JSON object/);
    });
  });

  describe('choices, embed, state operations', () => {
    it('parses choices and keeps their leading spaces', () => {
      assert.deepStrictEqual(parseChoices('choices', ' yes\n no\n'), [' yes', ' no']);
      assert.deepStrictEqual(parseChoices('choices', '[" a", "b"]'), [' a', 'b']);
      assert.throws(() => parseChoices('choices', ['a', '']), /choices: must be an array of non-empty strings/);
    });

    it('validates embed and state inputs', () => {
      assert.deepStrictEqual(prepareEmbed({ text: 'x', layer: '2' }), { text: 'x', layer: 2 });
      assert.throws(() => prepareEmbed({ text: 'x', layer: -1 }), /layer: must be an integer ≥ 0/);
      assert.deepStrictEqual(prepareStateOperation({}), { operation: 'list' });
      assert.throws(() => prepareStateOperation({ operation: 'load', name: 'n', source: new Uint8Array() }), /source: is an empty buffer/);
      assert.throws(() => prepareStateOperation({ operation: 'saveConversation', file: 'f' }), /prompt: is required to save a conversation/);
    });
  });

  it('progress lines count decoded tokens', () => {
    const t = new ProgressTracker();
    assert.strictEqual(t.update({ type: 'start', promptTokens: 10, cachedTokens: 4 }).text, 'prefill 0/6');
    assert.strictEqual(t.update({ type: 'delta', text: 'a', tokens: [1] }).text, '1 token');
    assert.strictEqual(t.update({ type: 'delta', text: 'b', tokens: [2] }).text, '2 tokens');
    assert.strictEqual(t.update({ type: 'delta', text: 'c', tokens: [3] }).text, '3 tokens');
  });
});
