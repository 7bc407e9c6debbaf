// The engine API of engine/api.ts over HTTP, as engine/remote-engine.ts calls it: generate streams its events
// as NDJSON (an error after the first event is a final `{"type":"error"}` line), the other calls answer JSON.
// Request objects pass through to the engine unchanged (it validates every field, and options added to the
// API later travel without a change here); only the signal is the server's own: the caller disconnecting
// cancels the work and frees the slot. File names are paths in the server's state folder, which the engine
// confines (engine/state-folder.ts); no route takes another path.

import type { Engine } from '../api';
import { RequestError } from '../errors';
import { deaRowFloats } from '../rwkv7/dea-sizes';
import { DEFAULT_MAX_CONTEXT } from '../state-shape';
import { NdjsonStream } from './event-stream';
import { GenerationStream } from './generation-stream';
import { HttpError } from './http-error';
import { readBody, readJsonObject } from './request-body';
import { sendJson, type RouteContext, type Router } from './router';
import { toWireError } from './wire-errors';

export const ENGINE_ROUTES = {
  info: '/v1/engine',
  generate: '/v1/engine/generate',
  choose: '/v1/engine/choose',
  embed: '/v1/engine/embed',
  states: '/v1/engine/states',
  loadState: '/v1/engine/states/load',
  uploadState: '/v1/engine/states/upload',
  unloadState: '/v1/engine/states/unload',
  saveConversation: '/v1/engine/conversations/save',
  loadConversation: '/v1/engine/conversations/load',
} as const;

export interface EngineRouteOptions {
  /** Bound of a JSON body. */
  maxBodyBytes: number;
  /** Bound of an uploaded state's bytes (the engine checks the exact bound of its model after). */
  maxStateBytes: number;
}

/** Per-call options as sent: an object of plain values; `signal` is never taken from a caller. */
function options(body: Record<string, unknown>, field = 'options'): Record<string, unknown> {
  const v = body[field];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new RequestError(`${field} must be an object`);
  const { signal: _ignored, ...rest } = v as Record<string, unknown>;
  return rest;
}

function stringField(body: Record<string, unknown>, field: string): string {
  const v = body[field];
  if (typeof v !== 'string') throw new RequestError(`${field} must be a string, got ${v === null ? 'null' : typeof v}`);
  return v;
}

export function addEngineRoutes(router: Router, engine: Engine, opts: EngineRouteOptions): void {
  const json = (ctx: RouteContext) => readJsonObject(ctx.req, opts.maxBodyBytes);

  router.add('GET', ENGINE_ROUTES.info, async ({ res }) => sendJson(res, 200, { modelInfo: engine.modelInfo, states: engine.listStates() }));

  router.add('POST', ENGINE_ROUTES.generate, async (ctx) => {
    const request = await json(ctx);
    const generation = await GenerationStream.open(engine, request as never, ctx.signal);
    const out = new NdjsonStream(ctx.res);
    out.open();
    try {
      for await (const event of generation.events()) {
        out.write(event);
        if (event.type === 'stop') ctx.metrics.generated(event.completionTokens);
      }
    } catch (err) {
      ctx.metrics.error(err instanceof Error ? err.name : 'Error');
      out.write({ type: 'error', error: toWireError(err) });
    }
  });

  router.add('POST', ENGINE_ROUTES.choose, async (ctx) => {
    const body = await json(ctx);
    const choices = body.choices;
    if (!Array.isArray(choices)) throw new RequestError('choices must be a non-empty array of strings');
    const result = await engine.choose(stringField(body, 'prompt'), choices as string[], { ...options(body), signal: ctx.signal });
    sendJson(ctx.res, 200, result);
  });

  router.add('POST', ENGINE_ROUTES.embed, async (ctx) => {
    const body = await json(ctx);
    const vector = await engine.embed(stringField(body, 'text'), { ...options(body), signal: ctx.signal });
    sendJson(ctx.res, 200, { embedding: Array.from(vector) });
  });

  router.add('GET', ENGINE_ROUTES.states, async ({ res }) => sendJson(res, 200, { states: engine.listStates() }));

  router.add('POST', ENGINE_ROUTES.loadState, async (ctx) => {
    const body = await json(ctx);
    const state = await engine.loadState(stringField(body, 'name'), stringField(body, 'file'));
    sendJson(ctx.res, 200, { state, states: engine.listStates() });
  });

  // The state's bytes as the body (application/octet-stream), its name in the query.
  router.add('POST', ENGINE_ROUTES.uploadState, async (ctx) => {
    const name = ctx.url.searchParams.get('name');
    if (name === null) throw new HttpError(400, 'name is required (?name=...)');
    const bytes = await readBody(ctx.req, opts.maxStateBytes);
    const state = await engine.loadState(name, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
    sendJson(ctx.res, 200, { state, states: engine.listStates() });
  });

  router.add('POST', ENGINE_ROUTES.unloadState, async (ctx) => {
    const body = await json(ctx);
    engine.unloadState(stringField(body, 'name'));
    sendJson(ctx.res, 200, { states: engine.listStates() });
  });

  router.add('POST', ENGINE_ROUTES.saveConversation, async (ctx) => {
    const body = await json(ctx);
    const saved = await engine.saveConversation(stringField(body, 'prompt'), stringField(body, 'file'), options(body));
    sendJson(ctx.res, 200, saved);
  });

  router.add('POST', ENGINE_ROUTES.loadConversation, async (ctx) => {
    const body = await json(ctx);
    const state = await engine.loadConversation(stringField(body, 'file'), stringField(body, 'name'));
    sendJson(ctx.res, 200, { state, states: engine.listStates() });
  });
}

/**
 * An upper bound of a state source for a model of this shape, before the engine's exact check: RWKV-7 heads
 * are 64 wide, so a state holds nLayer * (2 * C + 64 * C) floats; a source may hold it as f64, plus a
 * conversation's 2^20 tokens and logits, plus headers. A state that grows (RWKV-7b) adds a row per token up to
 * the engine's context limit `maxContext` (engine config), as a saved 7b conversation carries them.
 */
export function stateBytesBound(info: Engine['modelInfo'], maxContext = DEFAULT_MAX_CONTEXT): number {
  const floats = info.nLayer * (2 * info.nEmbd + 64 * info.nEmbd);
  const rows = info.version === 'v7b' ? 4 * maxContext * deaRowFloats(info) : 0;
  return 8 * floats + rows + 4 * (1 << 20) + 4 * info.vocabSize + (2 << 20);
}
