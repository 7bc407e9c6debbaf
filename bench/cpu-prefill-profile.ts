// Where a 512-token prefill chunk of the CPU backend's RWKV-7 pass spends its time, per kind of work, at 1 and 2
// threads: the forward pass runs in this thread (not the backend's compute worker) so its thread pool and kernels
// can be wrapped with timers. Matrix products, the WKV recurrence, prep / post (per token), the layer norm and
// token shift (lnShift), and the rest (embedding, output head, the host's bookkeeping) as the step's remainder.
//   node dist/bench/cpu-prefill-profile.js [--precision int8] [--model 0.1b|default] [--threads 1,2] [--rounds 3]

import * as path from 'path';
import { Arena } from '../engine/cpu/arena';
import { ThreadPool } from '../engine/cpu/thread-pool';
import { instantiateKernels, kernelModule } from '../engine/cpu/wasm-kernels';
import { int8ScratchBytes } from '../engine/cpu/int8-quant';
import { i16ScratchBytes } from '../engine/cpu/i16-quant';
import { planRwkv7CpuModel, Rwkv7CpuForward } from '../engine/rwkv7/cpu-forward';
import { describeModel } from '../engine/model-spec';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { packageRoot } from '../engine/package-root';
import type { CpuPrecision } from '../engine/cpu/cpu-weight-writer';
import { median } from './cpu';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

async function main() {
  const precision = arg('precision', 'int8') as CpuPrecision;
  const model = arg('model', '0.1b');
  const threadCounts = arg('threads', '1,2').split(',').map(Number);
  const rounds = Number(arg('rounds', '3'));
  const T = 512;
  const ck = model === '0.1b'
    ? randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 })
    : loadCheckpoint(path.join(packageRoot(), 'models', 'default.st'));
  const info = describeModel(ck);
  const maxThreads = Math.max(...threadCounts);
  const arena = new Arena();
  const plan = await planRwkv7CpuModel(arena, ck, info, { precision, quantLayers: 0, slots: 1, TMAX: T, RMAX: 1 });
  const L = plan.layout;
  const need = Math.max(plan.widestInput * 32, plan.weights.hasInt8 ? int8ScratchBytes(T, plan.widestInput) : 0, plan.weights.hasI16 ? i16ScratchBytes(T, plan.widestInput) : 0);
  L.scratchBytes = Math.ceil(need / 64) * 64;
  L.scratch = arena.alloc(maxThreads * L.scratchBytes);
  const { module } = kernelModule();
  const memory = arena.createMemory();
  plan.write(memory);
  const times: Record<string, number> = {};
  const timer = <F extends (...a: never[]) => unknown>(name: string, fn: F): F =>
    ((...a: Parameters<F>) => {
      const t0 = performance.now();
      const r = fn(...a);
      times[name] = (times[name] ?? 0) + performance.now() - t0;
      return r;
    }) as F;
  const ids = Int32Array.from({ length: T }, (_, i) => 1 + ((i * 7919) % (info.vocabSize - 1)));
  const results: Record<string, Record<string, number[]>> = {};
  const setups = threadCounts.map((threads) => {
    const kernels = instantiateKernels(memory, module);
    const pool = new ThreadPool(kernels, memory, module, threads);
    for (const op of ['matmul', 'wkv', 'prep', 'post'] as const) (pool as unknown as Record<string, unknown>)[op] = timer(op, pool[op].bind(pool) as never);
    const k = { ...kernels, lnShift: timer('lnShift', kernels.lnShift), deepEmbedGate: timer('deepEmbedGate', kernels.deepEmbedGate) };
    return { threads, pool, forward: new Rwkv7CpuForward(memory, k, pool, L, plan.weights) };
  });
  for (let r = 0; r < rounds + 1; r++) {
    for (const s of r % 2 ? [...setups].reverse() : setups) {
      new Float32Array(memory.buffer, L.state, L.stateSize).fill(0);
      for (const key of Object.keys(times)) delete times[key];
      const t0 = performance.now();
      s.forward.run([{ ids, segments: [{ slot: 0, start: 0, count: T, out: 'last', resultRow: 0 }] }], 1);
      const total = performance.now() - t0;
      if (r === 0) continue; // warm-up
      const row = (results[s.threads] ??= {});
      const parts = { ...times, rest: total - Object.values(times).reduce((a, b) => a + b, 0), total };
      for (const [name, ms] of Object.entries(parts)) (row[name] ??= []).push(ms);
    }
  }
  for (const [threads, row] of Object.entries(results)) {
    const ms = Object.fromEntries(Object.entries(row).map(([n, v]) => [n, +median(v).toFixed(1)]));
    console.log(JSON.stringify({ model, precision, threads: +threads, 'tok/s': +(T / (ms.total / 1000)).toFixed(1), ms }));
  }
  const [a, b] = threadCounts;
  if (results[a] && results[b]) {
    const speedup = Object.fromEntries(Object.keys(results[a]).map((n) => [n, +(median(results[a][n]) / median(results[b][n])).toFixed(2)]));
    console.log(JSON.stringify({ [`speed-up ${a} → ${b} threads`]: speedup }));
  }
  for (const s of setups) s.pool.dispose();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
