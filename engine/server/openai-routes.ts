// The OpenAI-compatible routes: /v1/completions and /v1/chat/completions (streamed as Server-Sent Events with
// `stream: true`), /v1/embeddings (float or base64), /v1/models. One model per server: a request's `model` is
// accepted whatever it names and answered with the server's model id.

import { randomUUID } from 'crypto';
import type { Engine, GenerateRequest } from '../api';
import { AbortError, RequestError } from '../errors';
import { SseStream } from './event-stream';
import { GenerationStream, type StopEvent } from './generation-stream';
import { readJsonObject } from './request-body';
import { errorBody, sendJson, type RouteContext, type Router } from './router';
import { chatRequest, completionRequest, finishReason } from './openai-request';

export interface OpenAiRouteOptions {
  maxBodyBytes: number;
  /** The id /v1/models lists (the model file's name). */
  modelId: string;
  /** Most inputs of one embeddings request. */
  maxEmbeddingInputs?: number;
}

/** Embeddings of one request running at once; the rest wait here rather than fill the engine's queue. */
const EMBED_CONCURRENCY = 16;

const nowSeconds = () => Math.floor(Date.now() / 1000);

function usage(stop: StopEvent) {
  return { prompt_tokens: stop.promptTokens, completion_tokens: stop.completionTokens, total_tokens: stop.promptTokens + stop.completionTokens };
}

export function addOpenAiRoutes(router: Router, engine: Engine, opts: OpenAiRouteOptions): void {
  const created = nowSeconds();
  const model = opts.modelId;

  router.add('GET', '/v1/models', async ({ res }) =>
    sendJson(res, 200, { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'rwkv-flow' }] }),
  );

  router.add('POST', '/v1/completions', async (ctx) => {
    const body = await readJsonObject(ctx.req, opts.maxBodyBytes);
    const request = completionRequest(body);
    const id = `cmpl-${randomUUID()}`;
    const chunk = (text: string, finish: string | null) => ({
      id,
      object: 'text_completion',
      created: nowSeconds(),
      model,
      choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
    });
    await generate(ctx, engine, request, body, {
      delta: (text) => chunk(text, null),
      end: (stop) => chunk('', finishReason(stop.reason)),
      usageChunk: (stop) => ({ ...chunk('', null), choices: [], usage: usage(stop) }),
      whole: (stop) => ({ ...chunk(stop.text, finishReason(stop.reason)), usage: usage(stop) }),
    });
  });

  router.add('POST', '/v1/chat/completions', async (ctx) => {
    const body = await readJsonObject(ctx.req, opts.maxBodyBytes);
    const request = chatRequest(body);
    const id = `chatcmpl-${randomUUID()}`;
    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created: nowSeconds(),
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    // The reply follows "Assistant:" and so starts with a space: dropped, as the chat nodes drop it.
    let started = false;
    await generate(ctx, engine, request, body, {
      first: () => chunk({ role: 'assistant', content: '' }, null),
      delta: (text) => {
        if (!started) text = text.replace(/^\s+/, '');
        if (!text) return null;
        started = true;
        return chunk({ content: text }, null);
      },
      end: (stop) => chunk({}, finishReason(stop.reason)),
      usageChunk: (stop) => ({ ...chunk({}, null), choices: [], usage: usage(stop) }),
      whole: (stop) => ({
        id,
        object: 'chat.completion',
        created: nowSeconds(),
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: stop.text.trim(), refusal: null }, logprobs: null, finish_reason: finishReason(stop.reason) }],
        usage: usage(stop),
      }),
    });
  });

  router.add('POST', '/v1/embeddings', async (ctx) => {
    const body = await readJsonObject(ctx.req, opts.maxBodyBytes);
    const inputs = typeof body.input === 'string' ? [body.input] : body.input;
    const most = opts.maxEmbeddingInputs ?? 2048;
    if (!Array.isArray(inputs) || inputs.length === 0 || !inputs.every((s) => typeof s === 'string')) {
      throw new RequestError('input must be a string or a non-empty array of strings (token arrays are not supported)');
    }
    if (inputs.length > most) throw new RequestError(`input has ${inputs.length} texts; at most ${most} per request`);
    const format = body.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') throw new RequestError(`encoding_format must be "float" or "base64", got ${JSON.stringify(format)}`);
    const dims = body.dimensions;
    if (dims !== undefined && dims !== null && dims !== engine.modelInfo.nEmbd) {
      throw new RequestError(`dimensions: this model's embeddings have ${engine.modelInfo.nEmbd} dimensions, got ${JSON.stringify(dims)}`);
    }
    const vectors = await mapLimited(inputs as string[], EMBED_CONCURRENCY, ctx.signal, (text, signal) => engine.embed(text, { signal }));
    sendJson(ctx.res, 200, {
      object: 'list',
      model,
      data: vectors.map((v, index) => ({
        object: 'embedding',
        index,
        embedding: format === 'base64' ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') : Array.from(v),
      })),
      // The engine API reports no token counts for embeddings.
      usage: { prompt_tokens: 0, total_tokens: 0 },
    });
  });
}

interface Shapes {
  first?: () => unknown;
  delta: (text: string) => unknown | null;
  end: (stop: StopEvent) => unknown;
  usageChunk: (stop: StopEvent) => unknown;
  whole: (stop: StopEvent) => unknown;
}

/** Runs a completion and answers it whole, or streamed as SSE chunks ending with `data: [DONE]`. */
async function generate(ctx: RouteContext, engine: Engine, request: GenerateRequest, body: Record<string, unknown>, shape: Shapes): Promise<void> {
  const generation = await GenerationStream.open(engine, request, ctx.signal);
  if (body.stream !== true) {
    let stop: StopEvent | undefined;
    for await (const event of generation.events()) if (event.type === 'stop') stop = event;
    if (!stop) throw new Error('the engine ended the generation without a stop event');
    ctx.metrics.generated(stop.completionTokens);
    sendJson(ctx.res, 200, shape.whole(stop));
    return;
  }
  const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
  const out = new SseStream(ctx.res);
  out.open();
  if (shape.first) out.write(shape.first());
  try {
    for await (const event of generation.events()) {
      if (event.type === 'delta') {
        const chunk = shape.delta(event.text);
        if (chunk) out.write(chunk);
      } else if (event.type === 'stop') {
        ctx.metrics.generated(event.completionTokens);
        out.write(shape.end(event));
        if (includeUsage) out.write(shape.usageChunk(event));
      }
    }
    out.done();
  } catch (err) {
    ctx.metrics.error(err instanceof Error ? err.name : 'Error');
    out.write(errorBody(err));
  }
}

/** fn over every item, at most `limit` at once, in order; the first failure cancels the rest. */
async function mapLimited<T, R>(items: T[], limit: number, outer: AbortSignal, fn: (item: T, signal: AbortSignal) => Promise<R>): Promise<R[]> {
  const controller = new AbortController();
  const forward = () => controller.abort();
  outer.addEventListener('abort', forward, { once: true });
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length && !controller.signal.aborted) {
      const i = next++;
      results[i] = await fn(items[i], controller.signal);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, () => worker().catch((err) => (controller.abort(), Promise.reject(err)))));
    if (controller.signal.aborted) throw new AbortError();
    return results;
  } finally {
    outer.removeEventListener('abort', forward);
  }
}
