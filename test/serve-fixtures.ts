// What the server tests share: a real RwkvEngine over the fake CPU backend (real validation, queueing,
// cancellation and counters, no GPU) behind a real `rwkv-flow serve` HTTP server on a loopback port.

import * as assert from 'assert';
import * as http from 'http';
import type { EngineConfig } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { startServer, type RunningServer, type ServerOptions } from '../engine/server/server';
import { byteTokenizer, FakeBackend, type FakeBackendOptions } from './fake-backend';

export function fakeEngine(backend: Partial<FakeBackendOptions> = {}, config: EngineConfig = {}): { engine: RwkvEngine; fake: FakeBackend } {
  const fake = new FakeBackend({ slots: 4, ...backend });
  return { fake, engine: new RwkvEngine({ backend: fake, tokenizer: byteTokenizer, config, compileConstraint: null }) };
}

/** An engine over the fake backend with the real World tokenizer and grammar module (JSON-schema output). */
export async function grammarEngine(slots = 2): Promise<RwkvEngine> {
  const { WorldTokenizer } = await import('../engine/tokenizer.js');
  const { compileConstraint } = await import('../engine/grammar/index.js');
  return new RwkvEngine({ backend: new FakeBackend({ slots, vocab: 65536 }), tokenizer: WorldTokenizer.bundled(), compileConstraint: compileConstraint as never });
}

export function serveOn(engine: RwkvEngine, opts: Partial<ServerOptions> = {}): Promise<RunningServer> {
  return startServer({ engine, host: '127.0.0.1', port: 0, modelId: 'fake.st', ...opts });
}

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A plain HTTP request (no client library), for what a hostile caller sends. */
export function rawRequest(
  url: string,
  opts: { method?: string; path: string; headers?: Record<string, string | number>; body?: string | Buffer },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(opts.path, url), { method: opts.method ?? 'POST', headers: opts.headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

export const jsonHeaders = (key?: string): Record<string, string> => ({
  'Content-Type': 'application/json',
  ...(key ? { Authorization: `Bearer ${key}` } : {}),
});

/** Prometheus text → { 'name{labels}': value }. */
export function parseMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

export async function metricsOf(url: string, key?: string): Promise<Record<string, number>> {
  const r = await rawRequest(url, { method: 'GET', path: '/metrics', headers: key ? { Authorization: `Bearer ${key}` } : {} });
  assert.strictEqual(r.status, 200, r.body);
  return parseMetrics(r.body);
}

export async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 20000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
