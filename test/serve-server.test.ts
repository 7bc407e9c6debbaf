// `rwkv-flow serve` over HTTP on a loopback port, with a real engine on the fake CPU backend: the OpenAI
// client library against the OpenAI-compatible routes, the API key, request bounds, hostile bodies,
// cancellation when the caller goes away, and /metrics.

import * as assert from 'assert';
import * as http from 'http';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import OpenAI from 'openai';
import type { RwkvEngine } from '../engine/engine';
import { startServer, type RunningServer } from '../engine/server/server';
import { fakeEngine, grammarEngine, jsonHeaders, metricsOf, rawRequest, serveOn, until } from './serve-fixtures';

const KEY = 'test-key-0123';
const greedy = { temperature: 0 };

describe('rwkv-flow serve: OpenAI-compatible API (openai npm client)', function () {
  this.timeout(60000);
  let engine: RwkvEngine;
  let server: RunningServer;
  let client: OpenAI;

  before(async () => {
    engine = fakeEngine({ slots: 4 }).engine;
    server = await serveOn(engine, { apiKey: KEY });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  });
  after(async () => {
    await server.close();
    await engine.close();
  });

  it('lists the model', async () => {
    const models = await client.models.list();
    assert.deepStrictEqual(
      models.data.map((m) => [m.id, m.object, m.owned_by]),
      [['fake.st', 'model', 'rwkv-flow']],
    );
  });

  it('chat: the reply is the engine generation of the RWKV dialogue prompt, with usage', async () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Hello there' },
    ];
    const reply = await client.chat.completions.create({ model: 'anything', messages, max_tokens: 12, temperature: 0, seed: 1 });
    // The same request straight to the engine.
    let stop: any;
    for await (const e of engine.generate({ prompt: 'System: Be brief.\n\nUser: Hello there\n\nAssistant:', maxTokens: 12, stop: ['\n\nUser:'], sampler: { temperature: 0, seed: 1 } })) {
      if (e.type === 'stop') stop = e;
    }
    assert.strictEqual(reply.object, 'chat.completion');
    assert.strictEqual(reply.model, 'fake.st');
    assert.strictEqual(reply.choices[0].message.role, 'assistant');
    assert.strictEqual(reply.choices[0].message.content, stop.text.trim());
    assert.strictEqual(reply.choices[0].finish_reason, stop.reason === 'length' ? 'length' : 'stop');
    assert.deepStrictEqual(reply.usage, { prompt_tokens: stop.promptTokens, completion_tokens: stop.completionTokens, total_tokens: stop.promptTokens + stop.completionTokens });
  });

  it('chat streaming: chunks add up to the non-streamed reply, then finish_reason and usage', async () => {
    const req = { model: 'fake', messages: [{ role: 'user' as const, content: 'Count with me' }], max_tokens: 16, temperature: 0, seed: 3 };
    const whole = await client.chat.completions.create(req);
    const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: unknown;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.strictEqual(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(chunks > 3, `only ${chunks} chunks`);
    assert.strictEqual(text.trim(), whole.choices[0].message.content);
    assert.strictEqual(finish, whole.choices[0].finish_reason);
    assert.deepStrictEqual(usage, whole.usage);
  });

  it('completions, whole and streamed', async () => {
    const whole = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
    assert.strictEqual(whole.object, 'text_completion');
    assert.strictEqual(whole.usage?.completion_tokens, 8);
    assert.strictEqual(whole.choices[0].finish_reason, 'length');
    const stream = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.strictEqual(text, whole.choices[0].text);
  });

  it('embeddings: the engine vectors, as floats and as the base64 the client asks for by default', async () => {
    const texts = ['first text', 'a second, longer text'];
    const expected = await Promise.all(texts.map((t) => engine.embed(t)));
    const viaBase64 = await client.embeddings.create({ model: 'x', input: texts });
    assert.deepStrictEqual(viaBase64.data.map((d) => d.index), [0, 1]);
    viaBase64.data.forEach((d, i) => assert.deepStrictEqual(Float32Array.from(d.embedding), expected[i]));
    const viaFloat = await client.embeddings.create({ model: 'x', input: texts[0], encoding_format: 'float' });
    assert.deepStrictEqual(Float32Array.from(viaFloat.data[0].embedding), expected[0]);
  });

  it('refuses what it cannot honour, as the client library\'s BadRequestError naming the field', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }], n: 2 }), (err: any) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.match(err.message, /n: only n = 1/);
      return true;
    });
    await assert.rejects(
      client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }),
      /tools are not supported/,
    );
    await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'wizard' as never, content: 'hi' }] }), /messages\[0\]\.role/);
    await assert.rejects(client.completions.create({ model: 'x', prompt: 'x', max_tokens: 0 }), /maxTokens must be an integer/);
  });

  it('a wrong key is the client library\'s AuthenticationError', async () => {
    const wrong = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (err: unknown) => err instanceof OpenAI.AuthenticationError);
  });
});

describe('rwkv-flow serve: response_format json_schema', function () {
  this.timeout(120000);

  it('constrains the chat reply to the schema (grammar module, World tokenizer)', async () => {
    const engine = await grammarEngine(2);
    const server = await serveOn(engine);
    try {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
      const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
      const reply = await client.chat.completions.create({
        model: 'x',
        messages: [{ role: 'user', content: 'Is it ok?' }],
        max_tokens: 40,
        seed: 2,
        response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
      });
      const parsed = JSON.parse(reply.choices[0].message.content!);
      assert.strictEqual(typeof parsed.ok, 'boolean');
      assert.deepStrictEqual(Object.keys(parsed), ['ok']);
      // A schema the engine refuses is a 400 naming the problem.
      await assert.rejects(
        client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'nonsense' } as never } } }),
        (err: unknown) => err instanceof OpenAI.BadRequestError,
      );
    } finally {
      await server.close();
      await engine.close();
    }
  });
});

describe('rwkv-flow serve: bounds, keys and hostile requests', function () {
  this.timeout(60000);
  let engine: RwkvEngine;
  let server: RunningServer;
  let stateDir: string;

  before(async () => {
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-serve-'));
    engine = fakeEngine({ slots: 2 }, { stateDir, maxQueue: 1 }).engine;
    server = await serveOn(engine, { apiKey: KEY, maxBodyBytes: 4096 });
  });
  after(async () => {
    await server.close();
    await engine.close();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  const post = (p: string, body: unknown, headers: Record<string, string | number> = jsonHeaders(KEY)) =>
    rawRequest(server.url, { path: p, headers, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('listens on the loopback address only by default', async () => {
    const e = fakeEngine().engine;
    const s = await startServer({ engine: e, port: 0 });
    try {
      assert.match(s.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    } finally {
      await s.close();
      await e.close();
    }
  });

  it('every route but /health needs the key; a wrong or missing one is 401, compared whole', async () => {
    assert.strictEqual((await rawRequest(server.url, { method: 'GET', path: '/health' })).status, 200);
    for (const auth of [undefined, 'Bearer wrong', `Bearer ${KEY}x`, `Bearer ${KEY.slice(0, -1)}`, KEY, 'Basic abc']) {
      const headers: Record<string, string> = { 'Content-Type': 'application/json', ...(auth ? { Authorization: auth } : {}) };
      for (const [method, p] of [['GET', '/metrics'], ['GET', '/v1/models'], ['POST', '/v1/engine/generate'], ['POST', '/v1/completions']]) {
        const r = await rawRequest(server.url, { method, path: p, headers, body: method === 'POST' ? '{"prompt":"x"}' : undefined });
        assert.strictEqual(r.status, 401, `${method} ${p} with ${auth}`);
        assert.strictEqual(r.headers['www-authenticate'], 'Bearer');
      }
    }
    assert.strictEqual((await rawRequest(server.url, { method: 'GET', path: '/v1/models', headers: { Authorization: `bearer ${KEY}` } })).status, 200);
  });

  it('refuses a body over the bound from its Content-Length, before reading it', async () => {
    const r = await post('/v1/completions', { prompt: 'x'.repeat(5000) });
    assert.strictEqual(r.status, 413);
    assert.match(JSON.parse(r.body).error.message, /at most 4096/);
  });

  it('cuts off a chunked body as soon as it passes the bound, and closes the connection', async () => {
    const received = await new Promise<{ status: number; body: string; sent: number }>((resolve, reject) => {
      const req = http.request(new URL('/v1/completions', server.url), { method: 'POST', headers: { ...jsonHeaders(KEY), 'Transfer-Encoding': 'chunked' } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, body, sent }));
      });
      req.on('error', reject);
      let sent = 0;
      // Keeps sending until the server answers: a server that buffered everything would never answer.
      const pump = () => {
        if (req.destroyed || sent > 64 * 1024 * 1024) return;
        sent += 16384;
        if (req.write('x'.repeat(16384))) setImmediate(pump);
        else req.once('drain', pump);
      };
      pump();
    });
    assert.strictEqual(received.status, 413);
    assert.match(JSON.parse(received.body).error.message, /over 4096 bytes/);
    assert.ok(received.sent < 64 * 1024 * 1024, 'the server read until the client gave up');
  });

  it('answers bad bodies with 4xx naming the problem, and keeps serving', async () => {
    const cases: [string, unknown, number, RegExp][] = [
      ['/v1/completions', '{"prompt": ', 400, /not valid JSON/],
      ['/v1/completions', '[1,2]', 400, /must be a JSON object/],
      ['/v1/completions', { prompt: 5 }, 400, /prompt must be a string/],
      // The operator's limits bind HTTP callers as they bind flows (maxTokensLimit, default 4096).
      ['/v1/completions', { prompt: 'x', max_tokens: 1e9 }, 400, /maxTokens 1000000000 is above this model's limit of 4096/],
      ['/v1/engine/generate', { prompt: 'x', maxTokens: 5000 }, 400, /maxTokens 5000 is above this model's limit of 4096/],
      ['/v1/engine/generate', { prompt: 'x', maxTokensLimit: 100000 }, 400, /unknown request field "maxTokensLimit"/],
      ['/v1/completions', { prompt: 'x', temperature: 'hot' }, 400, /temperature must be a number/],
      ['/v1/completions', { prompt: 'x', logit_bias: { abc: 1 } }, 400, /logit_bias: key "abc"/],
      ['/v1/chat/completions', { messages: 'hi' }, 400, /messages must be a non-empty array/],
      ['/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] }, 400, /tool results are not supported/],
      ['/v1/embeddings', { input: [] }, 400, /input must be a string or a non-empty array/],
      ['/v1/embeddings', { input: 'x', dimensions: 3 }, 400, /dimensions/],
      ['/v1/engine/generate', { prompt: 'x', modelPath: '/etc/passwd' }, 400, /unknown request field "modelPath"/],
      ['/v1/engine/generate', { prompt: 'x', sampler: { temperature: -1 } }, 400, /sampler\.temperature/],
      ['/v1/engine/embed', { text: 'x', options: { layer: 99 } }, 400, /layer must be an integer/],
      ['/v1/engine/conversations/save', { prompt: 'x', file: '../escape.cbor' }, 400, /\.\./],
      ['/v1/engine/conversations/save', { prompt: 'x', file: '/tmp/abs.cbor' }, 400, /must be a path relative to the state folder/],
      ['/v1/engine/states/load', { name: 's', file: 'missing.cbor' }, 400, /not found in the state folder, or not allowed/],
      ['/v1/nowhere', {}, 404, /no route/],
    ];
    for (const [p, body, status, message] of cases) {
      const r = await post(p, body);
      assert.strictEqual(r.status, status, `${p} ${JSON.stringify(body)}: ${r.body}`);
      assert.match(JSON.parse(r.body).error.message, message, p);
    }
    const wrongType = await post('/v1/completions', 'prompt=x', { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Bearer ${KEY}` });
    assert.strictEqual(wrongType.status, 415);
    const wrongMethod = await rawRequest(server.url, { method: 'GET', path: '/v1/completions', headers: jsonHeaders(KEY) });
    assert.strictEqual(wrongMethod.status, 405);
    assert.ok(!fs.existsSync(path.join(stateDir, '..', 'escape.cbor')));
    // Still serving.
    const ok = await post('/v1/completions', { prompt: 'still here', max_tokens: 3 });
    assert.strictEqual(ok.status, 200, ok.body);
  });

  it('a full queue is 429 with the engine\'s message, and the queued work is not disturbed', async () => {
    const slow = fakeEngine({ slots: 1, delayMs: 5 }, { maxQueue: 1 }).engine;
    const s = await serveOn(slow);
    try {
      const long = (n: number) => rawRequest(s.url, { path: '/v1/completions', headers: jsonHeaders(), body: JSON.stringify({ prompt: `p${n}`, max_tokens: 30 }) });
      const first = long(1);
      await until(() => slow.metrics().active === 1, 'the first request to run');
      const second = long(2);
      await until(() => slow.metrics().queued === 1, 'the second request to queue');
      const third = await long(3);
      assert.strictEqual(third.status, 429, third.body);
      assert.match(JSON.parse(third.body).error.message, /queue is full/);
      assert.strictEqual(JSON.parse(third.body).error.name, 'QueueFullError');
      assert.strictEqual((await first).status, 200);
      assert.strictEqual((await second).status, 200);
    } finally {
      await s.close();
      await slow.close();
    }
  });
});

describe('rwkv-flow serve: cancellation and metrics', function () {
  this.timeout(60000);

  it('a caller that disconnects mid-stream cancels its generation and frees the slot', async () => {
    const { engine, fake } = fakeEngine({ slots: 1, delayMs: 5 });
    const server = await serveOn(engine);
    try {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
      const controller = new AbortController();
      const stream = await client.chat.completions.create(
        // End of text (token 0) barred: only the disconnect can end it.
        { model: 'x', messages: [{ role: 'user', content: 'talk for ever' }], max_tokens: 4000, logit_bias: { '0': -1000 }, stream: true },
        { signal: controller.signal },
      );
      let chunks = 0;
      try {
        for await (const _ of stream) if (++chunks === 5) controller.abort();
      } catch {
        // the client library may end the loop with its abort error
      }
      assert.strictEqual(chunks, 5);
      await until(() => engine.metrics().active === 0, 'the slot to be freed', 5000);
      const steps = fake.calls.length;
      await new Promise((r) => setTimeout(r, 100));
      assert.strictEqual(fake.calls.length, steps, 'the engine kept stepping after the caller left');
      // The slot serves the next caller.
      const next = await client.completions.create({ model: 'x', prompt: 'next', max_tokens: 2 });
      assert.strictEqual(next.usage?.completion_tokens, 2);
    } finally {
      await server.close();
      await engine.close();
    }
  });

  it('metrics move: queue depth and busy slots while requests wait, tokens and errors after', async () => {
    const { engine } = fakeEngine({ slots: 1, delayMs: 5 }, { maxQueue: 8 });
    const server = await serveOn(engine, { apiKey: KEY });
    try {
      const before = await metricsOf(server.url, KEY);
      assert.strictEqual(before.rwkv_queue_depth, 0);
      assert.strictEqual(before.rwkv_slots_busy, 0);
      assert.strictEqual(before.rwkv_slots, 1);
      const send = (prompt: string) =>
        rawRequest(server.url, { path: '/v1/completions', headers: jsonHeaders(KEY), body: JSON.stringify({ prompt, max_tokens: 20, temperature: 0 }) });
      const running = [send('first prompt'), send('second prompt'), send('third prompt')];
      await until(async () => (await metricsOf(server.url, KEY)).rwkv_queue_depth === 2, 'two requests queued');
      const busy = await metricsOf(server.url, KEY);
      assert.strictEqual(busy.rwkv_slots_busy, 1);
      assert.ok(busy.rwkv_http_requests_in_flight >= 3);
      const answers = await Promise.all(running);
      for (const a of answers) assert.strictEqual(a.status, 200, a.body);
      await send('x'.repeat(0)).then((r) => assert.strictEqual(r.status, 400)); // empty prompt: a RequestError
      // A prompt long enough for the prefix cache, twice: the second time it is not prefilled again.
      const long = 'a prompt long enough to be kept in the prefix cache, which takes 64 tokens or more';
      await send(long);
      await send(long);
      const after = await metricsOf(server.url, KEY);
      assert.strictEqual(after.rwkv_queue_depth, 0);
      assert.strictEqual(after.rwkv_slots_busy, 0);
      assert.strictEqual(after.rwkv_completion_tokens_total - before.rwkv_completion_tokens_total, 5 * 20);
      assert.ok(after.rwkv_decode_tokens_total - before.rwkv_decode_tokens_total >= 5 * 19, 'decode tokens counted');
      assert.ok(after.rwkv_prefill_tokens_total > before.rwkv_prefill_tokens_total, 'prefill tokens counted');
      assert.ok(after.rwkv_cache_hit_tokens_total - before.rwkv_cache_hit_tokens_total >= long.length, 'cache hits counted');
      assert.strictEqual(after['rwkv_request_errors_total{kind="RequestError"}'], 1);
      assert.strictEqual(after['rwkv_http_requests_total{route="/v1/completions",status="200"}'], 5);
      assert.strictEqual(after['rwkv_http_requests_total{route="/v1/completions",status="400"}'], 1);
      assert.ok(after.rwkv_decode_tokens_per_second > 0, 'tokens/s over the last seconds');
    } finally {
      await server.close();
      await engine.close();
    }
  });
});
