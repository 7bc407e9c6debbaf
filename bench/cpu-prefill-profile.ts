// Where a 512-token prefill chunk of the CPU backend's RWKV-7 pass spends its time, per kind of work, at 1 and 2
// threads: the forward pass runs in this thread (not the backend's compute worker) so its thread pool and kernels
// can be wrapped with timers. Matrix products, the WKV recurrence, prep / post (per token), the layer norm and
// token shift (lnShift), and the rest (embedding, output head, the host's bookkeeping) as the step's remainder;
// then decode steps of one token. With --variants, several variants run alternated in one process (on a shared
// machine only ratios inside one process mean anything): name=kernels.wasm[:leader], where :leader runs lnShift
// on the leading thread alone (as before the split; main's build of the kernels has no lnShiftTokens), `current`
// the build in dist/.
//   node dist/bench/cpu-prefill-profile.js [--precision int8] [--model 0.1b|default|default-world] [--threads 1,2]
//     [--rounds 3] [--decode-steps N] [--variants main=/tmp/main/kernels-relaxed.wasm:leader,new=current]

import * as fs from 'fs';
import * as path from 'path';
import { ThreadPool } from '../engine/cpu/thread-pool';
import { instantiateKernels } from '../engine/cpu/wasm-kernels';
import { Rwkv7CpuForward } from '../engine/rwkv7/cpu-forward';
import type { CpuPrecision } from '../engine/cpu/cpu-weight-writer';
import { median } from './cpu';
import { planProfileModel } from './cpu-profile-model';

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
  const decodeSteps = Number(arg('decode-steps', model === '0.1b' ? '32' : '128'));
  const { info, plan, L, module, memory } = await planProfileModel(model, precision, T, Math.max(...threadCounts));
  // Wall ms per kind of work, and this process's CPU ms (all threads, spinning included) under `cpu <kind>`: on a
  // machine shared with other work, the one-thread CPU times are the steadier comparison.
  const times: Record<string, number> = {};
  const cpuMs = () => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  };
  const timer = <F extends (...a: never[]) => unknown>(name: string, fn: F): F =>
    ((...a: Parameters<F>) => {
      const c0 = cpuMs();
      const t0 = performance.now();
      const r = fn(...a);
      times[name] = (times[name] ?? 0) + performance.now() - t0;
      times[`cpu ${name}`] = (times[`cpu ${name}`] ?? 0) + cpuMs() - c0;
      return r;
    }) as F;
  const ids = Int32Array.from({ length: T }, (_, i) => 1 + ((i * 7919) % (info.vocabSize - 1)));
  const results: Record<string, Record<string, number[]>> = {};
  const variants = (arg('variants', '') || `current=${path.join(__dirname, '../engine/cpu/kernels-relaxed.wasm')}`).split(',').map((v) => {
    const [name, spec] = v.split('=');
    const [file, mode] = spec.split(':');
    return { name, module: file === 'current' ? module : new WebAssembly.Module(fs.readFileSync(file)), leader: mode === 'leader' };
  });
  const setups = variants.flatMap((v) => threadCounts.map((threads) => {
    const kernels = instantiateKernels(memory, v.module);
    const pool = new ThreadPool(kernels, memory, v.module, threads);
    for (const op of ['matmul', 'wkv', 'prep', 'post', 'lnShift'] as const) (pool as unknown as Record<string, unknown>)[op] = timer(op, pool[op].bind(pool) as never);
    // :leader — the layer norm and token shift on this thread alone, as before the split.
    if (v.leader) pool.lnShift = timer('lnShift', (x, T, C, ln, xn, prev, mix, M, out, region) => kernels.lnShift(x, T, C, ln, xn, prev, mix, M, out, region));
    const k = { ...kernels, deepEmbedGate: timer('deepEmbedGate', kernels.deepEmbedGate) };
    return { key: `${v.name}/${threads}`, threads, pool, forward: new Rwkv7CpuForward(memory, k, pool, L, plan.weights) };
  }));
  for (let r = 0; r < rounds + 1; r++) {
    for (const s of r % 2 ? [...setups].reverse() : setups) {
      new Float32Array(memory.buffer, L.state, L.stateSize).fill(0);
      for (const key of Object.keys(times)) delete times[key];
      const c0 = cpuMs();
      const t0 = performance.now();
      s.forward.run([{ ids, segments: [{ slot: 0, start: 0, count: T, out: 'last', resultRow: 0 }] }], 1);
      const total = performance.now() - t0;
      const cpuTotal = cpuMs() - c0;
      const prefillTimes = { ...times };
      // Decode, one sequence, after the prefill: one token a step, its logits row out.
      const d0 = performance.now();
      const dc0 = cpuMs();
      for (let i = 0; i < decodeSteps; i++) s.forward.run([{ ids: ids.subarray(i, i + 1), segments: [{ slot: 0, start: 0, count: 1, out: 'last', resultRow: 0 }] }], 1);
      const decodeMs = (performance.now() - d0) / decodeSteps;
      const decodeCpuMs = (cpuMs() - dc0) / decodeSteps;
      if (r === 0) continue; // warm-up
      const row = (results[s.key] ??= {});
      const wallParts = Object.entries(prefillTimes).filter(([n]) => !n.startsWith('cpu '));
      const parts = { ...prefillTimes, rest: total - wallParts.reduce((a, [, b]) => a + b, 0), total, 'cpu total': cpuTotal, 'decode step': decodeMs, 'cpu decode step': decodeCpuMs };
      for (const [name, ms] of Object.entries(parts)) (row[name] ??= []).push(ms);
    }
  }
  for (const [key, row] of Object.entries(results)) {
    const ms = Object.fromEntries(Object.entries(row).map(([n, v]) => [n, +median(v).toFixed(1)]));
    console.log(JSON.stringify({
      model, precision, variant: key,
      'prefill 512 tok/s wall / per CPU s': `${(T / (ms.total / 1000)).toFixed(1)} / ${(T / (ms['cpu total'] / 1000)).toFixed(1)}`,
      'decode b1 tok/s wall / per CPU s': `${(1000 / ms['decode step']).toFixed(1)} / ${(1000 / ms['cpu decode step']).toFixed(1)}`,
      ms,
    }));
  }
  const ratio = (a: string, b: string, what: string) => {
    if (!results[a] || !results[b]) return;
    const r = Object.fromEntries(Object.keys(results[a]).filter((n) => results[b][n]).map((n) => [n, +(median(results[a][n]) / median(results[b][n])).toFixed(2)]));
    console.log(JSON.stringify({ [what]: r }));
  };
  const [a, b] = threadCounts;
  for (const v of variants) ratio(`${v.name}/${a}`, `${v.name}/${b}`, `${v.name}: speed-up ${a} → ${b} threads (time ratio)`);
  for (const v of variants.slice(1)) for (const t of threadCounts) ratio(`${variants[0].name}/${t}`, `${v.name}/${t}`, `${v.name} vs ${variants[0].name}, ${t} threads: speed-up (time ratio)`);
  for (const s of setups) s.pool.dispose();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
