// `rwkv-flow serve`: loads the model once and serves it over HTTP (engine/server/server.ts) until SIGINT or
// SIGTERM, then stops taking requests, lets the running ones finish and releases the GPU.

import * as fs from 'fs';
import * as path from 'path';
import type { EngineConfig } from '../engine/api';
import type { EngineMetrics } from '../engine/engine';
import { checkEngineConfig } from '../engine/engine-config';
import { resolveModelPath } from '../engine/engine-factory';
import { DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT, startServer } from '../engine/server/server';
import { acquireEngine } from '../engine/shared-engine';
import { cliPrecision, quantLayersFlag } from './precision-flag';

export const SERVE_USAGE = `  rwkv-flow serve [--model FILE] [--port N] [--host ADDR] [--api-key KEY] [--config FILE.json]
                  [--max-batch N] [--max-queue N] [--state-dir DIR] [--cache-mib N] [--precision P [--quant-layers N]]
                  [--max-body-bytes N]
    Serves the model over HTTP on ${DEFAULT_HOST}:${DEFAULT_PORT} unless told otherwise: the engine API the
    nodes use in "server" mode, OpenAI-compatible /v1/completions, /v1/chat/completions, /v1/embeddings,
    /v1/models, /health and Prometheus /metrics. The key may also come from RWKV_FLOW_API_KEY (kept out of
    the process list). --config holds any engine settings as JSON (the fields of EngineConfig); flags win.`;

export const SERVE_OPTIONS = {
  port: { type: 'string' },
  host: { type: 'string' },
  'api-key': { type: 'string' },
  config: { type: 'string' },
  'max-batch': { type: 'string' },
  'max-queue': { type: 'string' },
  'state-dir': { type: 'string' },
  'cache-mib': { type: 'string' },
  'max-body-bytes': { type: 'string' },
} as const;

type Values = Partial<Record<keyof typeof SERVE_OPTIONS | 'model' | 'precision' | 'quant-layers', string>> & { f32?: boolean };

function integer(name: string, v: string | undefined, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, got '${v}'`);
  return n;
}

/** The engine settings: --config's JSON, then the flags over it. */
export function serveEngineConfig(values: Values): EngineConfig {
  let config: EngineConfig = {};
  if (values.config !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(fs.readFileSync(values.config, 'utf8'));
    } catch (err) {
      throw new Error(`--config ${values.config}: ${(err as Error).message}`);
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`--config ${values.config}: must hold a JSON object of engine settings`);
    config = parsed as EngineConfig;
  }
  const flags: EngineConfig = {
    modelPath: values.model,
    precision: values.precision !== undefined || values.f32 ? cliPrecision(values) : undefined,
    // The precision it goes with may come from --config: the engine config check below judges the pair.
    quantLayers: quantLayersFlag(values),
    maxBatch: integer('max-batch', values['max-batch'], 1),
    maxQueue: integer('max-queue', values['max-queue'], 0),
    stateDir: values['state-dir'],
  };
  const cacheMiB = values['cache-mib'];
  if (cacheMiB !== undefined) {
    const n = Number(cacheMiB);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--cache-mib must be a number ≥ 0, got '${cacheMiB}'`);
    flags.cacheBytes = Math.round(n * 1024 * 1024);
  }
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) (config as Record<string, unknown>)[k] = v;
  checkEngineConfig(config);
  return config;
}

export async function serve(values: Values): Promise<number> {
  const config = serveEngineConfig(values);
  const apiKey = values['api-key'] ?? (process.env.RWKV_FLOW_API_KEY || undefined);
  const host = values.host ?? DEFAULT_HOST;
  const port = integer('port', values.port, 0) ?? DEFAULT_PORT;
  if (port > 65535) throw new Error(`--port must be at most 65535, got ${port}`);
  const maxBodyBytes = integer('max-body-bytes', values['max-body-bytes'], 1024) ?? DEFAULT_MAX_BODY_BYTES;
  const lease = await acquireEngine(config);
  const engine = lease.engine as typeof lease.engine & { metrics(): EngineMetrics | null };
  let server;
  try {
    server = await startServer({
      engine,
      engineMetrics: () => engine.metrics(),
      host,
      port,
      apiKey,
      maxBodyBytes,
      maxContext: config.maxContext,
      modelId: path.basename(resolveModelPath(config)),
    });
  } catch (err) {
    await lease.release();
    throw err;
  }
  const loopback = host === DEFAULT_HOST || host === 'localhost' || host === '::1';
  if (!loopback && !apiKey) process.stderr.write(`rwkv-flow serve: warning: listening on ${host} without an API key; anyone who reaches it can use the model\n`);
  const info = engine.modelInfo;
  process.stderr.write(
    `rwkv-flow serve: ${path.basename(resolveModelPath(config))} (${info.nLayer} layers, ${info.nEmbd} wide, on ${info.adapter}) at ${server.url}` +
      `${apiKey ? ', API key required' : ''}${loopback ? '' : ' — reachable from other hosts'}\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  process.stderr.write('rwkv-flow serve: stopping (running requests finish first)\n');
  await server.close();
  await lease.release();
  return 0;
}
