// Bench section `serve`: aggregate generation throughput of 64 concurrent requests sent by two client
// processes (32 each, through the remote engine, as n8n workers in queue mode would) to one `rwkv-flow serve`
// server, against the same 64 requests submitted to the engine in this process. The server answers from
// this process (it owns the engine, as `rwkv-flow serve` does), so both runs use one engine and one GPU.
// Also the resident memory of a client process next to this process holding the model.
//
//   npm run bench -- --sections serve                 (any adapter; tiny bundled model on a CPU driver)
//   RWKV_BENCH_MODEL=/models/x.st npm run bench -- --sections serve

import { fork, type ChildProcess } from 'child_process';
import * as path from 'path';
import { RwkvEngine } from '../engine/engine';
import { bundledModelPath, tokenizerFor } from '../engine/engine-factory';
import { startServer } from '../engine/server/server';
import { benchRequest, type ClientReport } from './serve-client';

export interface ServeBenchOptions {
  requests: number;
  clients: number;
  maxTokens: number;
  rounds: number;
}

const GPU: ServeBenchOptions = { requests: 64, clients: 2, maxTokens: 128, rounds: 3 };
const CPU: ServeBenchOptions = { requests: 64, clients: 2, maxTokens: 12, rounds: 2 };

async function inProcess(engine: RwkvEngine, opts: ServeBenchOptions): Promise<{ tokens: number; ms: number }> {
  const t0 = performance.now();
  const counts = await Promise.all(
    Array.from({ length: opts.requests }, async (_, i) => {
      let n = 0;
      for await (const e of engine.generate(benchRequest(i, opts.maxTokens))) if (e.type === 'stop') n = e.completionTokens;
      return n;
    }),
  );
  return { tokens: counts.reduce((a, b) => a + b, 0), ms: performance.now() - t0 };
}

function startClient(url: string): Promise<{ child: ChildProcess; rss: number }> {
  const child = fork(path.join(__dirname, 'serve-client.js'), [url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m: { ready?: boolean; rss?: number; error?: string }) => (m.ready ? resolve({ child, rss: m.rss ?? 0 }) : reject(new Error(m.error))));
    child.once('exit', (code) => reject(new Error(`bench client exited with ${code}`)));
  });
}

async function throughServer(clients: ChildProcess[], opts: ServeBenchOptions): Promise<{ tokens: number; ms: number }> {
  const per = opts.requests / clients.length;
  const t0 = performance.now();
  const reports = await Promise.all(
    clients.map(
      (child, c) =>
        new Promise<ClientReport>((resolve, reject) => {
          child.once('message', (m: ClientReport) => (m.error ? reject(new Error(m.error)) : resolve(m)));
          child.send({ first: c * per, count: per, maxTokens: opts.maxTokens });
        }),
    ),
  );
  return { tokens: reports.reduce((n, r) => n + r.tokens, 0), ms: performance.now() - t0 };
}

export async function benchServe(gpu: unknown, onGpu: boolean, log: (l: string) => void = console.log): Promise<Record<string, unknown>> {
  const opts = onGpu ? GPU : CPU;
  const { createBackend } = await import('../engine/backend.js');
  const file = process.env.RWKV_BENCH_MODEL ?? (onGpu ? undefined : bundledModelPath());
  let model: Parameters<typeof createBackend>[0]['model'];
  let label: string;
  if (file) {
    model = file;
    label = path.basename(file);
  } else {
    const { randomRwkv7Checkpoint } = await import('../engine/random-model.js');
    model = randomRwkv7Checkpoint({ nLayer: 24, nEmbd: 2048, vocabSize: 65536, seed: 3, dtype: 'f16' });
    label = 'random RWKV-7 L24 C2048 V65536';
  }
  const backend = await createBackend({ model, slots: opts.requests, gpu: gpu as never, maxTokens: 512 + opts.requests });
  const engine = new RwkvEngine({ backend, tokenizer: tokenizerFor(backend.info), config: { maxBatch: opts.requests } });
  const server = await startServer({ engine, port: 0 });
  const clients: ChildProcess[] = [];
  try {
    const started = await Promise.all(Array.from({ length: opts.clients }, () => startClient(server.url)));
    clients.push(...started.map((s) => s.child));
    await inProcess(engine, { ...opts, requests: 4, maxTokens: 4 }); // warm-up: pipelines, caches
    const local: number[] = [];
    const remote: number[] = [];
    const steps = { local: 0, remote: 0 };
    const hostMs = { local: 0, remote: 0 };
    // Steps and GPU time of a run tell scheduling (how requests arrived and batched) from HTTP overhead.
    const measured = async <T extends { tokens: number; ms: number }>(run: () => Promise<T>) => {
      const before = engine.metrics();
      const r = await run();
      const after = engine.metrics();
      return { ...r, steps: after.steps - before.steps, gpuMs: after.backendMs - before.backendMs };
    };
    const show = (r: { tokens: number; ms: number; steps: number; gpuMs: number }) =>
      `${r.tokens} tokens in ${r.ms.toFixed(0)} ms (${r.steps} steps, ${r.gpuMs.toFixed(0)} ms in GPU calls)`;
    for (let round = 0; round < opts.rounds; round++) {
      const a = await measured(() => inProcess(engine, opts));
      local.push((a.tokens / a.ms) * 1000);
      const b = await measured(() => throughServer(clients, opts));
      remote.push((b.tokens / b.ms) * 1000);
      log(`  round ${round + 1}: in process ${show(a)}; through the server ${show(b)}`);
      steps.local += a.steps / opts.rounds;
      steps.remote += b.steps / opts.rounds;
      hostMs.local += (a.ms - a.gpuMs) / opts.rounds;
      hostMs.remote += (b.ms - b.gpuMs) / opts.rounds;
    }
    const best = (xs: number[]) => Math.max(...xs);
    const rss = process.memoryUsage().rss;
    return {
      model: label,
      requests: opts.requests,
      client_processes: opts.clients,
      tokens_per_request: opts.maxTokens,
      in_process_tok_s: round1(best(local)),
      server_tok_s: round1(best(remote)),
      server_vs_in_process: Math.round((best(remote) / best(local)) * 1000) / 1000,
      // Where a difference comes from: more steps (requests arriving over HTTP a little apart join a step
      // later) or more time outside GPU calls (HTTP, JSON, events).
      in_process_steps: round1(steps.local),
      server_steps: round1(steps.remote),
      in_process_ms_outside_gpu_calls: Math.round(hostMs.local),
      server_ms_outside_gpu_calls: Math.round(hostMs.remote),
      engine_process_rss_mb: Math.round(rss / 2 ** 20),
      client_process_rss_mb: Math.round(Math.max(...started.map((s) => s.rss)) / 2 ** 20),
    };
  } finally {
    for (const c of clients) c.kill();
    await server.close();
    await engine.close();
  }
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: (ctx: { gpu: unknown; onGpu: boolean }) => Promise<Record<string, unknown>>) => void): void {
  register('serve', ({ gpu, onGpu }) => benchServe(gpu, onGpu));
}
