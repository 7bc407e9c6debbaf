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

import { ThreadPool, type MatmulTask } from '../engine/cpu/thread-pool';
import { instantiateKernels } from '../engine/cpu/wasm-kernels';
import { Rwkv7CpuForward } from '../engine/rwkv7/cpu-forward';
import { createBackend } from '../engine/backend';
import type { CpuPrecision } from '../engine/cpu/cpu-weight-writer';
import { median } from './cpu';
import { planProfileModel } from './cpu-profile-model';

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
  const T = 16;
  const { ck, info, plan, L, module, memory } = await planProfileModel(model, precision, T, threads);
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
