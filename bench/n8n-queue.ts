// Bench section `n8n-queue`: the memory of n8n queue mode with two workers (bench/n8n-queue-cluster.ts), the
// model loaded in each worker (credential "in this process") against one `rwkv-flow serve` that both use
// ("server at URL"). Same model file, precision and device choice in both; the same webhook calls, all at once.
// Reported per process after the calls: resident memory now and at its peak, and GPU memory per process where
// nvidia-smi lists it. With a software adapter or the CPU backend the "GPU" memory is host memory, so it is in
// the resident figures. Also the engine's weight bytes (one copy of the model as the engine holds it).
//
//   N8N_E2E_BIN=.../node_modules/n8n/bin/n8n N8N_E2E_NODE=.../node24/bin/node npm run bench -- --sections n8n-queue
//   RWKV_BENCH_MODEL=/models/x.st ...   (default: the bundled model)
//
// Needs n8n (scripts/ci-hosts.sh installs it under ~/.cache/rwkv-flow-ci) and redis-server on PATH; without
// them the section reports what is missing and measures nothing.

import { execFileSync } from 'child_process';
import * as path from 'path';
import { bundledModelPath } from '../engine/engine-factory';
import { COMPLETION_WEBHOOK, N8nQueueCluster, onPath, residentMemory, type ManagedProcess } from './n8n-queue-cluster';

const WORKERS = 2;
/** Executions per worker at once; the server gets the slots of both workers. */
const CONCURRENCY = 4;
const CALLS = 16;
const MAX_TOKENS = 32;
const PROMPT = 'The Linux kernel is';
const MB = 2 ** 20;

/** GPU memory per process id in bytes, from nvidia-smi; null where there is no nvidia-smi to ask. */
function gpuMemoryByPid(): Map<number, number> | null {
  if (!onPath('nvidia-smi')) return null;
  const out = execFileSync('nvidia-smi', ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits'], { encoding: 'utf8' });
  const byPid = new Map<number, number>();
  for (const line of out.split('\n')) {
    const [pid, mib] = line.split(',').map((x) => Number(x.trim()));
    if (Number.isInteger(pid) && Number.isFinite(mib)) byPid.set(pid, (byPid.get(pid) ?? 0) + mib * MB);
  }
  return byPid;
}

interface ProcessMemory {
  process: string;
  rss_mb: number;
  peak_rss_mb: number;
  /** null: no nvidia-smi; 0: nvidia-smi does not list the process. */
  gpu_mb: number | null;
}

function memoryOf(p: ManagedProcess, gpu: Map<number, number> | null): ProcessMemory {
  const m = residentMemory(p.pid);
  return {
    process: p.name,
    rss_mb: Math.round(m.rssBytes / MB),
    peak_rss_mb: Math.round(m.peakRssBytes / MB),
    gpu_mb: gpu ? Math.round((gpu.get(p.pid) ?? 0) / MB) : null,
  };
}

async function measure(
  engine: 'process' | 'server',
  common: { n8nBin: string; nodeBin: string; redisBin: string; model: string },
  log: (l: string) => void,
): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const cluster = await N8nQueueCluster.start({
    ...common,
    engine,
    workers: WORKERS,
    concurrency: CONCURRENCY,
    maxBatch: engine === 'server' ? WORKERS * CONCURRENCY : CONCURRENCY,
    log: (l) => log(`  [${engine}] ${l}`),
  });
  try {
    log(`  [${engine}] started in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    // Before any call: a worker has not loaded the model yet (it loads at its first execution).
    const idle = cluster.workers.map((w) => Math.round(residentMemory(w.pid).rssBytes / MB));
    const t1 = performance.now();
    const answers = await Promise.all(Array.from({ length: CALLS }, () => cluster.call(COMPLETION_WEBHOOK.path, PROMPT, MAX_TOKENS)));
    const seconds = (performance.now() - t1) / 1000;
    let tokens = 0;
    for (const a of answers) {
      if (a.status !== 200) throw new Error(`[${engine}] a webhook call answered ${a.status}: ${a.body.slice(0, 2000)}\n${cluster.logs()}`);
      tokens += (JSON.parse(a.body) as { usage: { completionTokens: number } }).usage.completionTokens;
    }
    const ran = cluster.started.map((ids) => ids.length);
    await new Promise((r) => setTimeout(r, 1000));
    const gpu = gpuMemoryByPid();
    const workers = cluster.workers.map((w) => memoryOf(w, gpu));
    const server = cluster.server ? memoryOf(cluster.server, gpu) : null;
    const main = memoryOf(cluster.main, gpu);
    const sum = (xs: (ProcessMemory | null)[], f: (m: ProcessMemory) => number | null) => xs.reduce((n, m) => n + (m ? (f(m) ?? 0) : 0), 0);
    const holders = [...workers, server];
    const result = {
      engine: engine === 'server' ? 'server at URL (one rwkv-flow serve)' : 'in this process (each worker loads the model)',
      calls: CALLS,
      executions_per_worker: ran,
      tokens,
      seconds: Math.round(seconds * 10) / 10,
      worker_idle_rss_mb: idle,
      workers,
      server,
      main,
      // What the model costs across the processes that run executions (the main is the same in both).
      workers_and_server_rss_mb: sum(holders, (m) => m.rss_mb),
      workers_and_server_gpu_mb: gpu ? sum(holders, (m) => m.gpu_mb) : null,
      server_line: cluster.server?.output().match(/rwkv-flow serve: .*/)?.[0] ?? null,
    };
    log(`  [${engine}] ${JSON.stringify(result)}`);
    return result;
  } finally {
    await cluster.stop();
  }
}

/** One copy of the weights as the engine holds them (same file, precision and device choice as the runs). */
async function weightBytes(model: string): Promise<{ bytes: number; adapter: string }> {
  const { createBackend } = await import('../engine/backend.js');
  const backend = await createBackend({ model, slots: 1, precision: 'f16', device: 'auto' });
  try {
    return { bytes: backend.weightBytes, adapter: backend.adapterName };
  } finally {
    backend.dispose();
  }
}

export async function benchN8nQueue(log: (l: string) => void = console.log): Promise<Record<string, unknown>> {
  const n8nBin = process.env.N8N_E2E_BIN;
  const redisBin = onPath('redis-server');
  if (!n8nBin) return { skipped: 'N8N_E2E_BIN is not set: point it at node_modules/n8n/bin/n8n (scripts/ci-hosts.sh installs n8n)' };
  if (!redisBin) return { skipped: 'no redis-server on PATH (.ci/install-redis installs it)' };
  const common = { n8nBin, nodeBin: process.env.N8N_E2E_NODE ?? process.execPath, redisBin, model: process.env.RWKV_BENCH_MODEL ?? bundledModelPath() };
  const weights = await weightBytes(common.model);
  log(`  ${path.basename(common.model)}: ${(weights.bytes / MB).toFixed(1)} MB of weights (f16) on ${weights.adapter}`);
  const inProcess = await measure('process', common, log);
  const server = await measure('server', common, log);
  return {
    model: path.basename(common.model),
    precision: 'f16',
    weight_mb: Math.round((weights.bytes / MB) * 10) / 10,
    adapter: weights.adapter,
    workers: WORKERS,
    concurrency_per_worker: CONCURRENCY,
    tokens_per_call: MAX_TOKENS,
    in_process: inProcess,
    server,
  };
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('n8n-queue', () => benchN8nQueue());
}
