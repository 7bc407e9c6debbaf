// Where one b1 decode step of the CPU backend goes (issue #18: int8 decode of the 17M World-head model at one
// thread against llama.cpp's q8_0). Two views, alternated round by round in one process:
//  - in this thread: the RWKV-7 pass with its pool and kernels wrapped in timers, the head's product apart from
//    the layers' products, WKV, prep / post, layer norm + token shift, and the rest (embedding, the output row's
//    layer norm, copying the row out, bookkeeping);
//  - through the backend (createBackend, device 'cpu', output 'top' as the engine decodes): the whole step as a
//    caller sees it, whose excess over the in-thread step is the fixed per-token cost (messages, the row's copy,
//    the 'top' reduction).
//   node dist/bench/cpu-decode-profile.js [--precision int8] [--model default-world|default|0.1b] [--threads 1]
//     [--rounds 5] [--steps 128]

import * as path from 'path';
import { Arena } from '../engine/cpu/arena';
import { ThreadPool, type MatmulTask } from '../engine/cpu/thread-pool';
import { instantiateKernels, kernelModule } from '../engine/cpu/wasm-kernels';
import { int8ScratchBytes } from '../engine/cpu/int8-quant';
import { i16ScratchBytes } from '../engine/cpu/i16-quant';
import { planRwkv7CpuModel, Rwkv7CpuForward } from '../engine/rwkv7/cpu-forward';
import { describeModel } from '../engine/model-spec';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { packageRoot } from '../engine/package-root';
import { createBackend } from '../engine/backend';
import type { CpuPrecision } from '../engine/cpu/cpu-weight-writer';
import { median } from './cpu';
import { worldVocabCheckpoint } from './cpu-baseline';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

async function main() {
  const precision = arg('precision', 'int8') as CpuPrecision;
  const model = arg('model', 'default-world');
  const threads = Number(arg('threads', '1'));
  const rounds = Number(arg('rounds', '5'));
  const steps = Number(arg('steps', model === '0.1b' ? '32' : '128'));
  const bundled = () => loadCheckpoint(path.join(packageRoot(), 'models', 'default.st'));
  const ck = model === '0.1b'
    ? randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 })
    : model === 'default-world' ? worldVocabCheckpoint(bundled()) : bundled();
  const info = describeModel(ck);
  const T = 16;
  const arena = new Arena();
  const plan = await planRwkv7CpuModel(arena, ck, info, { precision, quantLayers: 0, slots: 1, TMAX: T, RMAX: 1 });
  const L = plan.layout;
  const need = Math.max(plan.widestInput * 32, plan.weights.hasInt8 ? int8ScratchBytes(T, plan.widestInput) : 0, plan.weights.hasI16 ? i16ScratchBytes(T, plan.widestInput) : 0);
  L.scratchBytes = Math.ceil(need / 64) * 64;
  L.scratch = arena.alloc(threads * L.scratchBytes);
  const { module } = kernelModule();
  const memory = arena.createMemory();
  plan.write(memory);
  const kernels = instantiateKernels(memory, module);
  const pool = new ThreadPool(kernels, memory, module, threads);
  const times: Record<string, number> = {};
  const add = (name: string, ms: number) => (times[name] = (times[name] ?? 0) + ms);
  const headW = plan.weights.head.w;
  const mm = pool.matmul.bind(pool);
  pool.matmul = (n: number, tasks: MatmulTask[], scratch: number, scratchBytes: number) => {
    const t0 = performance.now();
    mm(n, tasks, scratch, scratchBytes);
    add(tasks.some((t) => t.w === headW) ? 'head product' : 'layer products', performance.now() - t0);
  };
  for (const op of ['wkv', 'prep', 'post', 'lnShift'] as const) {
    const f = (pool[op] as (...a: unknown[]) => void).bind(pool);
    (pool as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => {
      const t0 = performance.now();
      f(...a);
      add(op, performance.now() - t0);
    };
  }
  const forward = new Rwkv7CpuForward(memory, kernels, pool, L, plan.weights);
  const be = await createBackend({ model: ck, slots: 1, device: 'cpu', threads, precision, maxTokens: T, maxRows: 1 });
  const ids = Int32Array.from({ length: steps + 16 }, (_, i) => 1 + ((i * 7919) % (info.vocabSize - 1)));

  const inThread = () => {
    new Float32Array(memory.buffer, L.state, L.stateSize).fill(0);
    for (const key of Object.keys(times)) delete times[key];
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) forward.run([{ ids: ids.subarray(i, i + 1), segments: [{ slot: 0, start: 0, count: 1, out: 'last', resultRow: 0 }] }], 1);
    const total = (performance.now() - t0) / steps;
    const parts: Record<string, number> = Object.fromEntries(Object.entries(times).map(([n, ms]) => [n, ms / steps]));
    parts.rest = total - Object.values(parts).reduce((a, b) => a + b, 0);
    parts['step in thread'] = total;
    return parts;
  };
  const throughBackend = async () => {
    be.resetState(0);
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) await be.run([{ slot: 0, tokens: [ids[i]], output: 'top' }]);
    return (performance.now() - t0) / steps;
  };

  const results: Record<string, number[]> = {};
  for (let r = 0; r < rounds + 1; r++) {
    const a = r % 2 ? { backend: await throughBackend(), ...inThread() } : { ...inThread(), backend: await throughBackend() };
    if (r === 0) continue; // warm-up
    for (const [n, ms] of Object.entries(a)) (results[n] ??= []).push(ms);
  }
  const ms = Object.fromEntries(Object.entries(results).map(([n, v]) => [n, `${median(v).toFixed(3)} (${Math.min(...v).toFixed(3)}–${Math.max(...v).toFixed(3)})`]));
  const step = median(results['step in thread']);
  const share = Object.fromEntries(Object.entries(results).filter(([n]) => n !== 'backend' && n !== 'step in thread').map(([n, v]) => [n, `${((100 * median(v)) / step).toFixed(1)} %`]));
  const backend = median(results.backend);
  console.log(JSON.stringify({
    model, precision, threads, steps, rounds,
    'ms per step, median (min–max) of rounds': ms,
    'share of the in-thread step': share,
    'fixed cost through the backend, ms (backend − in-thread)': +(backend - step).toFixed(3),
    'tok/s through the backend': +(1000 / backend).toFixed(1),
  }, null, 1));
  pool.dispose();
  be.dispose();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
