// Tool calling through the RWKV Chat Model (n8n AI Agent): the tools become a JSON-Schema-constrained
// choice between one call and an answer, and calls and results round-trip in the dialogue. The
// adapter mechanics run on the fake engine; the reply schema on the real grammar compiler; one call
// on the real engine with the bundled model.

import * as assert from 'assert';
import { compileConstraint } from '../engine/grammar';
import { setEngineProvider } from '../nodes/shared/engine-provider';
import { releaseIdleEngines } from '../nodes/n8n/engine-keeper';
import type { Message, StreamChunk, Tool } from '../nodes/n8n/ai-node-sdk';
import { replySchema, toolSpecs } from '../nodes/n8n/chat-tools';
import { RwkvChatModel } from '../nodes/n8n/rwkv-chat-model';
import { FakeEngine, FakeEngineProvider } from './nodes-fake-engine';
import { acceptsText } from './grammar-check-text';
import { worldTokenizer } from './grammar-vocab';

const text = (role: Message['role'], t: string): Message => ({ role, content: [{ type: 'text', text: t }] });

const CALCULATOR: Tool = {
  type: 'function',
  name: 'calculator',
  description: 'Evaluates a math expression.',
  inputSchema: { type: 'object', properties: { input: { type: 'string' } }, required: ['input'], additionalProperties: false },
};
const WEATHER: Tool = {
  type: 'function',
  name: 'weather',
  description: 'Current weather of a city.',
  inputSchema: {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    properties: { city: { $ref: '#/definitions/city' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'],
    additionalProperties: false,
    definitions: { city: { type: 'string', enum: ['Paris', 'Oslo'] } },
  },
};

describe('RWKV Chat Model tool calling', function () {
  this.timeout(120000);
  let provider: FakeEngineProvider;
  let replies: string[];

  beforeEach(() => {
    process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    replies = [];
    provider = new FakeEngineProvider(new FakeEngine({ reply: () => replies.shift() ?? '{"answer":"done"}' }));
    setEngineProvider(provider.provide);
  });
  afterEach(async () => {
    await releaseIdleEngines();
    setEngineProvider(undefined);
    delete process.env.RWKV_FLOW_IDLE_SECONDS;
  });

  const model = (toolUse: 'auto' | 'required' = 'auto') => new RwkvChatModel({ modelPath: '/m.st' }, { maxTokens: 64 }, { toolUse });

  it('binds tools: lists them in a System turn and constrains the reply to a call or an answer', async () => {
    replies.push('{"tool":"calculator","arguments":{"input":"2+2"}}');
    const bound = model().withTools([CALCULATOR]);
    const result = await bound.generate([text('system', 'Be helpful.'), text('user', 'What is 2+2?')]);
    const req = provider.engine.requests[0];
    assert.match(req.prompt, /^System: Be helpful\.\n\nSystem: You can use tools\./);
    assert.match(req.prompt, /- calculator: Evaluates a math expression\. Arguments: \{"type":"object","properties":\{"input":\{"type":"string"\}\}/);
    assert.match(req.prompt, /\n\nUser: What is 2\+2\?\n\nAssistant:$/);
    const schema = req.jsonSchema as { anyOf: { properties: Record<string, unknown> }[] };
    assert.deepStrictEqual(schema.anyOf.map((b) => Object.keys(b.properties)), [['answer'], ['tool', 'arguments']]);
    assert.strictEqual(result.finishReason, 'tool-calls');
    const [call] = result.message.content;
    assert.strictEqual(call.type, 'tool-call');
    assert.strictEqual(call.toolName, 'calculator');
    assert.deepStrictEqual(JSON.parse(call.input!), { input: '2+2' });
    assert.match(call.toolCallId!, /^call_/);
  });

  it('round-trips the call and the tool result in the dialogue, then answers', async () => {
    replies.push('{"answer":"It is 4."}');
    const result = await model()
      .withTools([CALCULATOR])
      .generate([
        text('user', 'What is 2+2?'),
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'calculator', input: '{"input":"2+2"}' }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', result: '4' }] },
      ]);
    const prompt = provider.engine.requests[0].prompt;
    assert.match(prompt, /\n\nUser: What is 2\+2\?\n\nAssistant: \{"tool":"calculator","arguments":\{"input":"2\+2"\}\}\n\nTool: 4\n\nAssistant:$/);
    assert.deepStrictEqual(result.message.content, [{ type: 'text', text: 'It is 4.' }]);
    assert.strictEqual(result.finishReason, 'stop');
  });

  it('"One Tool Call, Then Answer": a call is required first, and the answer after the tool result', async () => {
    replies.push('{"tool":"calculator","arguments":{"input":"1"}}', '{"answer":"1"}');
    const bound = model('required').withTools([CALCULATOR]);
    await bound.generate([text('user', 'one?')]);
    const first = provider.engine.requests[0].jsonSchema as { anyOf: { properties: object }[] };
    assert.deepStrictEqual(first.anyOf.map((b) => Object.keys(b.properties)), [['tool', 'arguments']]);
    await bound.generate([
      text('user', 'one?'),
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c', toolName: 'calculator', input: '{"input":"1"}' }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c', result: [{ type: 'text', text: '1' }] }] },
    ]);
    const second = provider.engine.requests[1];
    assert.match(second.prompt, /\n\nTool: 1\n\nAssistant:$/);
    assert.deepStrictEqual((second.jsonSchema as { anyOf: { properties: object }[] }).anyOf.map((b) => Object.keys(b.properties)), [['answer']]);
  });

  it('streams a call as one tool-call delta and finishes with tool-calls', async () => {
    replies.push('{"tool":"calculator","arguments":{"input":"3*3"}}');
    const chunks: StreamChunk[] = [];
    for await (const c of model().withTools([CALCULATOR]).stream([text('user', '3*3?')])) chunks.push(c);
    assert.strictEqual(chunks.length, 2);
    const [delta, finish] = chunks as [Extract<StreamChunk, { type: 'tool-call-delta' }>, Extract<StreamChunk, { type: 'finish' }>];
    assert.strictEqual(delta.type, 'tool-call-delta');
    assert.strictEqual(delta.name, 'calculator');
    assert.strictEqual(delta.argumentsDelta, '{"input":"3*3"}');
    assert.strictEqual(finish.finishReason, 'tool-calls');
    assert.strictEqual(provider.held, 0);
  });

  it('uses the SDK converter for parameter schemas (Zod) and refuses provider tools and bad names', () => {
    const seen: string[] = [];
    const m = new RwkvChatModel({}, {}, { parametersJsonSchema: (t) => (seen.push(t.name), { type: 'object', properties: {} }) });
    m.withTools([{ type: 'function', name: 'zodTool', inputSchema: { safeParse() {} } }]);
    assert.deepStrictEqual(seen, ['zodTool']);
    assert.throws(() => m.withTools([{ type: 'provider', name: 'web_search' }]), /"web_search" is a provider tool/);
    assert.throws(() => m.withTools([{ name: 'bad name' }]), /tools\[0\]\.name: must be/);
    assert.throws(() => m.withTools([CALCULATOR, CALCULATOR]), /"calculator" is bound twice/);
  });

  it('Output Format: a JSON schema or a grammar constrains the answer (structured output)', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    replies.push('{"n":4}');
    const json = await new RwkvChatModel({}, {}, { jsonSchema: schema }).generate([text('user', '2+2?')]);
    assert.deepStrictEqual(provider.engine.requests[0].jsonSchema, schema);
    assert.deepStrictEqual(json.message.content, [{ type: 'text', text: '{"n":4}' }]);
    replies.push(' yes');
    await new RwkvChatModel({}, {}, { grammar: 'root ::= " yes" | " no"' }).generate([text('user', 'ok?')]);
    assert.strictEqual(provider.engine.requests[1].grammar, 'root ::= " yes" | " no"');
    // With tools, the answer branch carries the schema.
    replies.push('{"answer":{"n":4}}');
    const both = await new RwkvChatModel({}, {}, { jsonSchema: schema }).withTools([CALCULATOR]).generate([text('user', '2+2?')]);
    assert.deepStrictEqual(both.message.content, [{ type: 'text', text: '{"n":4}' }]);
    assert.throws(() => new RwkvChatModel({}, {}, { jsonSchema: schema, grammar: 'root ::= "x"' }), /either a grammar or a JSON schema/);
  });

  it('a grammar output format cannot be combined with tools', () => {
    const m = new RwkvChatModel({}, {}, { grammar: 'root ::= "x"' });
    assert.throws(() => m.withTools([CALCULATOR]), /a grammar cannot be combined with tools/);
  });

  it('the reply schema compiles and accepts exactly well-formed calls (refs rebased, $schema dropped)', () => {
    const specs = toolSpecs([CALCULATOR, WEATHER].map((t) => ({ name: t.name, description: t.description, parameters: t.inputSchema })));
    const schema = replySchema(specs, { reply: 'either' });
    const c = compileConstraint({ jsonSchema: schema }, worldTokenizer());
    assert.ok(acceptsText(c, '{"answer":"hi"}'));
    assert.ok(acceptsText(c, '{"tool":"calculator","arguments":{"input":"2+2"}}'));
    assert.ok(acceptsText(c, '{"tool":"weather","arguments":{"city":"Oslo","days":3}}'));
    assert.ok(!acceptsText(c, '{"tool":"weather","arguments":{"city":"Rome","days":3}}'));
    assert.ok(!acceptsText(c, '{"tool":"weather","arguments":{"city":"Oslo","days":9}}'));
    assert.ok(!acceptsText(c, '{"tool":"calculator","arguments":{"city":"Oslo","days":3}}'));
    assert.ok(!acceptsText(c, '{"tool":"search","arguments":{}}'));
    const callOnly = compileConstraint({ jsonSchema: replySchema(specs, { reply: 'call' }) }, worldTokenizer());
    assert.ok(!acceptsText(callOnly, '{"answer":"hi"}'));
    const answerOnly = compileConstraint({ jsonSchema: replySchema(specs, { reply: 'answer' }) }, worldTokenizer());
    assert.ok(acceptsText(answerOnly, '{"answer":"hi"}'));
    assert.ok(!acceptsText(answerOnly, '{"tool":"calculator","arguments":{"input":"2+2"}}'));
    const typed = compileConstraint(
      { jsonSchema: replySchema(specs, { reply: 'either', answerSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false } }) },
      worldTokenizer(),
    );
    assert.ok(acceptsText(typed, '{"answer":{"n":4}}'));
    assert.ok(!acceptsText(typed, '{"answer":"4"}'));
  });
});

describe('RWKV Chat Model tool calling on the real engine (bundled model)', function () {
  this.timeout(300000);
  before(() => {
    process.env.RWKV_FLOW_IDLE_SECONDS = '0';
    setEngineProvider(undefined);
  });
  after(async () => {
    await releaseIdleEngines();
    delete process.env.RWKV_FLOW_IDLE_SECONDS;
  });

  it('"One Tool Call, Then Answer" gets a well-formed call whose arguments fit the tool schema', async () => {
    const m = new RwkvChatModel({ maxBatch: 1 }, { maxTokens: 40, seed: 1 }, { toolUse: 'required' }).withTools([CALCULATOR, WEATHER]);
    const result = await m.generate([text('user', 'What is 12 times 7?')]);
    assert.strictEqual(result.finishReason, 'tool-calls');
    const [call] = result.message.content;
    assert.strictEqual(call.type, 'tool-call');
    const args = JSON.parse(call.input!);
    if (call.toolName === 'calculator') assert.strictEqual(typeof args.input, 'string');
    else {
      assert.strictEqual(call.toolName, 'weather');
      assert.ok(['Paris', 'Oslo'].includes(args.city) && Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, call.input);
    }
  });
});
