// `npm run bench -- --sections quantise`: host time of the load-time quantisers (engine/quant/) on one matrix
// of the 1.5B shape's FFN, 2048 x 8192 (16.8 M weights; the 1.5B model quantises 1.3 billion at load), from
// f16 bits (what an f16 checkpoint holds) and from f32 values, output arrays included. Median of 7 after two
// warm-ups, in CPU milliseconds of this process (less sensitive than wall time to other load on the machine).
// No GPU involved.
//
//   --quantise-rows 2048 --quantise-cols 8192   another shape

import * as os from 'os';
import { f32ToF16 } from '../engine/loader/dtype';
import type { GpuContext } from '../engine/gpu/device';
import { quantizeRowsInt8 } from '../engine/quant/int8-rows';
import { quantizeNf4 } from '../engine/quant/nf4-blocks';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function cpuMs(fn: () => unknown, reps = 7): number {
  fn();
  fn();
  const times: number[] = [];
  for (let r = 0; r < reps; r++) {
    const c0 = process.cpuUsage();
    fn();
    const c = process.cpuUsage(c0);
    times.push((c.user + c.system) / 1000);
  }
  return times.sort((a, b) => a - b)[reps >> 1];
}

export function benchQuantise(log: (s: string) => void = console.log): Record<string, unknown> {
  const n = Number(arg('quantise-rows') ?? 2048);
  const k = Number(arg('quantise-cols') ?? 8192);
  if (!(Number.isInteger(n) && n > 0 && Number.isInteger(k) && k > 0)) throw new Error(`--quantise-rows / --quantise-cols: not a shape: ${n} x ${k}`);
  // Weights of a trained matrix's spread: mostly small, some outliers, rows of different magnitudes.
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const values = new Float32Array(n * k);
  for (let i = 0; i < values.length; i++) values[i] = (rnd() - 0.5) * 0.1 * (1 + 3 * rnd() ** 8);
  const bits = f32ToF16(values);
  const result: Record<string, unknown> = { shape: `${n}x${k}`, cpus: os.cpus().length, loadAverage: +os.loadavg()[0].toFixed(2) };
  for (const [label, fn] of [
    ['int8 from f16 bits', () => quantizeRowsInt8(bits, n, k)],
    ['int8 from f32', () => quantizeRowsInt8(values, n, k)],
    ['nf4 from f16 bits', () => quantizeNf4(bits)],
    ['nf4 from f32', () => quantizeNf4(values)],
  ] as const) {
    const ms = cpuMs(fn);
    result[`${label} ms`] = +ms.toFixed(1);
    log(`${label}: ${ms.toFixed(1)} ms per ${n}x${k} matrix (${((ms * 1e6) / (n * k)).toFixed(2)} ns a weight)`);
  }
  return result;
}

export function registerSection(register: (name: string, section: (ctx: { gpu: GpuContext; onGpu: boolean; seconds: number }) => Promise<Record<string, unknown>>) => void) {
  register('quantise', async () => benchQuantise());
}
