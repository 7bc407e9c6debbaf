// HTTP routing of `rwkv-flow serve`: exact method + path routes, the API key check, one AbortSignal per
// request that fires when the caller goes away (so the engine cancels its work and frees the slot), the
// error answer every route shares, and the request/error counters.

import type { IncomingMessage, ServerResponse } from 'http';
import type { ApiKeyCheck } from './api-key';
import { HttpError } from './http-error';
import type { ServerMetrics } from './metrics';
import { statusOf, toWireError } from './wire-errors';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** Aborts when the caller disconnects before the answer is complete. */
  signal: AbortSignal;
  metrics: ServerMetrics;
}

export type RouteHandler = (ctx: RouteContext) => Promise<void>;

interface Route {
  handler: RouteHandler;
  /** false: answered without the API key (health checks of load balancers). */
  auth: boolean;
}

export class Router {
  private readonly routes = new Map<string, Map<string, Route>>();

  constructor(
    private readonly apiKey: ApiKeyCheck,
    private readonly metrics: ServerMetrics,
  ) {}

  add(method: 'GET' | 'POST', path: string, handler: RouteHandler, opts: { auth?: boolean } = {}): void {
    let byMethod = this.routes.get(path);
    if (!byMethod) this.routes.set(path, (byMethod = new Map()));
    byMethod.set(method, { handler, auth: opts.auth ?? true });
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    // A caller gone mid-answer makes writes fail; that is an abort, never a crash.
    res.on('error', () => controller.abort());
    this.metrics.requestStarted();
    let route = 'unmatched';
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const byMethod = this.routes.get(url.pathname);
      if (!byMethod) throw new HttpError(404, `no route ${url.pathname}`);
      const found = byMethod.get(req.method ?? '');
      if (!found) throw new HttpError(405, `${req.method} is not allowed on ${url.pathname} (allowed: ${[...byMethod.keys()].join(', ')})`);
      route = url.pathname;
      if (found.auth) this.apiKey.check(req);
      await found.handler({ req, res, url, signal: controller.signal, metrics: this.metrics });
    } catch (err) {
      this.metrics.error(err instanceof Error ? err.name : 'Error');
      sendError(res, err);
    } finally {
      this.metrics.requestEnded(route, res.statusCode);
      if (!res.writableEnded && !res.destroyed) res.end();
    }
  }
}

/** The one error body of every route: OpenAI's `{error: {message, type, code}}` plus the engine's class name. */
export function errorBody(err: unknown): { error: Record<string, unknown> } {
  const wire = toWireError(err);
  const status = err instanceof HttpError ? err.status : statusOf(err);
  const type = err instanceof HttpError ? err.type : status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
  return { error: { ...wire, type, code: status, param: null } };
}

export function sendError(res: ServerResponse, err: unknown): void {
  if (res.destroyed) return;
  if (res.headersSent) {
    res.end();
    return;
  }
  const status = err instanceof HttpError ? err.status : statusOf(err);
  if (err instanceof HttpError && err.close) res.setHeader('Connection', 'close');
  if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
  sendJson(res, status, errorBody(err));
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
