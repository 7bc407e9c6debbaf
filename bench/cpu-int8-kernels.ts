// Same-process A/B of builds of the CPU kernels on the int8 matrix product alone: the 0.1B model's shapes at a
// 512-token prefill chunk (and one token, decode), 1 and 2 threads, builds alternated round by round in one
// process over one shared memory (on a machine shared with other work only such ratios mean anything).
//   node dist/bench/cpu-int8-kernels.js --builds old=/tmp/main/kernels-relaxed.wasm,new=dist/engine/cpu/kernels-relaxed.wasm
//     [--threads 1,2] [--rounds 5] [--tokens 512,1] [--kind 2]
// Prints GMAC/s medians per build and the ratio of each build to the first.

import * as fs from 'fs';
import { ThreadPool } from '../engine/cpu/thread-pool';
import { instantiateKernels, kernelModule } from '../engine/cpu/wasm-kernels';
import { int8Panels, int8ScratchBytes } from '../engine/cpu/int8-quant';
import { i16Panels, i16ScratchBytes, quantizeRowsI16 } from '../engine/cpu/i16-quant';
import { median } from './cpu';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

/** The 0.1B model's products (n rows × k inputs): r/k/v/o, the ffn key and value, a LoRA stage of each side. */
const SHAPES: [string, number, number][] = [
  ['768x768', 768, 768],
  ['3072x768', 3072, 768],
  ['768x3072', 768, 3072],
  ['64x768', 64, 768],
  ['768x64', 768, 64],
];

async function main() {
  kernelModule(); // turns on relaxed SIMD where Node needs the flag
  const builds = arg('builds', `new=${__dirname}/../engine/cpu/kernels-relaxed.wasm`).split(',').map((s) => {
    const [name, file] = s.split('=');
    return { name, module: new WebAssembly.Module(fs.readFileSync(file)) };
  });
  const threadCounts = arg('threads', '1,2').split(',').map(Number);
  const rounds = Number(arg('rounds', '5'));
  const tokenCounts = arg('tokens', '512,1').split(',').map(Number);
  const kind = Number(arg('kind', '2'));
  const TMAX = Math.max(...tokenCounts);
  const K = 3072;
  const scratchBytes = kind === 2 ? int8ScratchBytes(TMAX, K) : i16ScratchBytes(TMAX, K);
  const weightBytes = 3072 * 768 * (kind === 2 ? 1 : 2) + 3072 * 64;
  const W = 65536;
  const X = W + weightBytes + 4096;
  const Y = X + TMAX * K * 4;
  const S = Y + TMAX * K * 4;
  const pages = Math.ceil((S + 2 * scratchBytes + 65536) / 65536);
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  const f32 = new Float32Array(memory.buffer);
  let seed = 7;
  const rnd = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32 - 0.5);
  for (let i = 0; i < TMAX * K; i++) f32[X / 4 + i] = rnd() * 2;
  const pools = new Map<string, ThreadPool>();
  for (const b of builds) for (const t of threadCounts) pools.set(`${b.name}/${t}`, new ThreadPool(instantiateKernels(memory, b.module), memory, b.module, t));
  const wantShapes = arg('shapes', SHAPES.map((s) => s[0]).join(',')).split(',');
  for (const [label, n, k] of SHAPES.filter((s) => wantShapes.includes(s[0]))) {
    const w = Float32Array.from({ length: n * k }, () => rnd() * 0.1);
    const packed = kind === 2 ? await int8Panels(w, n, k) : i16Panels(await quantizeRowsI16(w, n, k), n, k);
    new Uint8Array(memory.buffer).set(packed, W);
    const task = { w: W, kind, n, k, panels: Math.ceil(n / 8), x: X, xs: k, y: Y, ys: n };
    for (const T of tokenCounts) {
      for (const threads of threadCounts) {
        const reps = Math.max(1, Math.round(Number(arg("macs", "1.5e9")) / (n * k * T)));
        const got = new Map<string, number[]>(builds.map((b) => [b.name, []]));
        const gotCpu = new Map<string, number[]>(builds.map((b) => [b.name, []]));
        for (let r = 0; r < rounds; r++) {
          const order = r % 2 ? [...builds].reverse() : builds;
          for (const b of order) {
            const pool = pools.get(`${b.name}/${threads}`)!;
            pool.matmul(T, [task], S, scratchBytes); // warm
            const c0 = process.cpuUsage();
            const t0 = performance.now();
            for (let i = 0; i < reps; i++) pool.matmul(T, [task], S, scratchBytes);
            const s = (performance.now() - t0) / 1000;
            const c = process.cpuUsage(c0);
            const cpuS = (c.user + c.system) / 1e6;
            got.get(b.name)!.push((n * k * T * reps) / s / 1e9);
            gotCpu.get(b.name)!.push((n * k * T * reps) / cpuS / 1e9);
          }
        }
        // Wall and per CPU second (all threads, spinning included): on a shared machine the second is steadier.
        const m = (g: Map<string, number[]>, b: string) => median(g.get(b)!);
        const fmt = (b: string) => `${m(got, b).toFixed(2)} / ${m(gotCpu, b).toFixed(2)}`;
        const ratio = (b: string) => `${(m(got, b) / m(got, builds[0].name)).toFixed(3)} / ${(m(gotCpu, b) / m(gotCpu, builds[0].name)).toFixed(3)}`;
        console.log(JSON.stringify({
          shape: label, T, threads,
          'GMAC/s wall / per CPU s': Object.fromEntries(builds.map((b) => [b.name, fmt(b.name)])),
          ratio: Object.fromEntries(builds.slice(1).map((b) => [b.name, ratio(b.name)])),
        }));
      }
    }
  }
  for (const p of pools.values()) p.dispose();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
