// `rwkv-flow serve`: one process owns the engine and answers HTTP — the engine API the remote engine uses
// (engine-routes.ts), the OpenAI-compatible routes (openai-routes.ts), /health and /metrics. Bound to
// 127.0.0.1 unless told otherwise; an optional bearer key guards every route but /health.

import * as http from 'http';
import type { AddressInfo } from 'net';
import type { Engine } from '../api';
import type { EngineMetrics } from '../engine';
import { ApiKeyCheck } from './api-key';
import { addEngineRoutes, stateBytesBound } from './engine-routes';
import { ServerMetrics } from './metrics';
import { addOpenAiRoutes } from './openai-routes';
import { Router, sendJson } from './router';

export interface ServerOptions {
  engine: Engine;
  /** The engine's counters for /metrics; default: the engine's own `metrics()` when it has one. */
  engineMetrics?: () => EngineMetrics | null;
  /** Non-null when the engine can no longer serve (GPU lost): /health answers 503 with it. */
  engineBroken?: () => string | null;
  host?: string;
  /** 0 = any free port. */
  port?: number;
  apiKey?: string;
  /** Bound of a JSON request body (default 1 MiB). */
  maxBodyBytes?: number;
  /** Bound of an uploaded state (default: derived from the model's shape and maxContext). */
  maxStateBytes?: number;
  /** The engine's context limit (engine config maxContext), for the upload bound of a state that grows (RWKV-7b). */
  maxContext?: number;
  /** Id listed by /v1/models. */
  modelId?: string;
}

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 8720;
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface RunningServer {
  /** http://host:port */
  readonly url: string;
  readonly server: http.Server;
  readonly metrics: ServerMetrics;
  /** Stops accepting connections, ends idle ones, waits for the open requests. */
  close(): Promise<void>;
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const engine = opts.engine;
  const apiKey = new ApiKeyCheck(opts.apiKey);
  const withMetrics = engine as Engine & { metrics?: () => EngineMetrics | null };
  const engineMetrics = opts.engineMetrics ?? (() => withMetrics.metrics?.() ?? null);
  const metrics = new ServerMetrics(engineMetrics);
  const router = new Router(apiKey, metrics);
  const maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  router.add(
    'GET',
    '/health',
    async ({ res }) => {
      const broken = opts.engineBroken?.() ?? null;
      sendJson(res, broken ? 503 : 200, broken ? { status: 'error', error: broken } : { status: 'ok' });
    },
    { auth: false },
  );
  router.add('GET', '/metrics', async ({ res }) => {
    const text = metrics.text();
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  });
  addEngineRoutes(router, engine, { maxBodyBytes, maxStateBytes: opts.maxStateBytes ?? stateBytesBound(engine.modelInfo, opts.maxContext) });
  addOpenAiRoutes(router, engine, { maxBodyBytes, modelId: opts.modelId ?? 'rwkv' });

  const server = http.createServer((req, res) => void router.handle(req, res));
  // A caller must send its whole request within these (slow-loris); answers may stream for as long as needed.
  server.headersTimeout = 20_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  const host = opts.host ?? DEFAULT_HOST;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? DEFAULT_PORT, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    server,
    metrics,
    close: async () => {
      metrics.stop();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await closed;
    },
  };
}
