// Kernel microbenchmark of the matrix products (`npm run bench -- --sections matmul`, or
// `node dist/bench/matmul.js`): every kernel variant the device can run, built exactly as the engine builds it
// (engine/rwkv7/matmul.ts), on one random f16 matrix at a time, for several token counts. Each variant is
// first checked against a float64 reference on sampled rows (its output poisoned with NaN beforehand, so an
// unwritten element shows), then timed with timestamp queries: µs per product, TFLOP/s, weight GB/s.
// Small shapes run first, so a kernel that does not finish shows up on a small problem (the watchdog ends
// the process naming the stage; a single product that takes longer than HANG_SECONDS ends it too).
// Self-check: every variant that fails to build or run, or misses its error bound (ERROR_BOUND), is listed
// after the summary and the section fails (checkMatmulRows), after every other variant was still timed.
// Split-K variants (mm_split.wgsl) run as the engine runs them: the product, then the reduction of its partials.

import * as fs from 'fs';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { bindGroup, createBuffer, makeKernel } from '../engine/gpu/kernel';
import { f16BitsToF32, f32ToF16 } from '../engine/loader/dtype';
import { packQuantizedGroup } from '../engine/quant/gpu-matrix-group';
import {
  groupUniform, matmulDispatch, matmulShader, reducesAfter, splitOf, splitReduceDispatch, splitReduceShader, splitScratchFloats, type MatmulVariant,
  tiledInputHalves, tileInputDispatch, tileInputShader,
} from '../engine/rwkv7/matmul';
import type { MatrixGroup } from '../engine/rwkv7/weights';
import { GpuSpanTimer, calibrateRepetitions, median } from './device/gpu-span-timer';
import { progress } from './device/progress';

export interface MatmulCase {
  /** Output rows (matrix height). */
  n: number;
  /** Inputs (matrix width), a multiple of 64. */
  k: number;
  /** Tokens. */
  rows: number;
}

/** Small first, then the 1.5B shape's products (C = 2048; the FFN's 4C key and value). */
export const MATMUL_CASES: MatmulCase[] = [
  { n: 64, k: 64, rows: 16 },
  { n: 160, k: 96, rows: 37 },
  { n: 256, k: 256, rows: 64 },
  // Batch 1 (decode): the streaming kernel's shapes at the 0.1B and 1.5B widths.
  ...[768, 2048].flatMap((d) => [{ n: d, k: d, rows: 1 }, { n: 4 * d, k: d, rows: 1 }, { n: d, k: 4 * d, rows: 1 }]),
  { n: 2048, k: 2048, rows: 4 },
  ...[8, 16, 32, 64, 128, 512].map((rows) => ({ n: 2048, k: 2048, rows })),
  // The 0.1B shape (C = 768) in a prefill chunk and at batch 64.
  { n: 768, k: 768, rows: 512 },
  { n: 3072, k: 768, rows: 512 },
  { n: 768, k: 3072, rows: 64 },
  // The 1.5B batched-decode shapes of the split-K products: ffn value (K = 4C), ffn key, and 2048² above.
  ...[16, 32, 64].map((rows) => ({ n: 2048, k: 8192, rows })),
  ...[16, 32, 64].map((rows) => ({ n: 8192, k: 2048, rows })),
  { n: 8192, k: 2048, rows: 128 },
  { n: 8192, k: 2048, rows: 256 },
  { n: 8192, k: 2048, rows: 512 },
  { n: 2048, k: 8192, rows: 512 },
];

export const SMOKE_MATMUL_CASES: MatmulCase[] = [
  { n: 64, k: 64, rows: 16 },
  { n: 160, k: 96, rows: 37 },
];

/** The streaming kernel at batch 1–4 with 32 (one subgroup), 64, 128 and 256 lanes a row (engine/rwkv7/vec-lanes.ts). */
export const VEC_LANE_VARIANTS: MatmulVariant[] = ([32, 64, 128, 256] as const).map((lpr): MatmulVariant => ({ kind: 'vec', tb: 4, lpr }));

/** Subgroup-matrix configurations tried (mt × nt tiles per subgroup, sgs subgroups, kc inputs per stage). */
export const SGMAT_VARIANTS: MatmulVariant[] = (
  [
    [1, 1, 4, 64],
    [2, 1, 4, 64],
    [4, 1, 4, 64],
    [4, 1, 4, 32],
    [4, 2, 2, 64],
    [4, 4, 1, 64],
    [2, 2, 1, 64],
    [1, 1, 1, 64],
  ] as const
).map(([mt, nt, sgs, kc]): MatmulVariant => ({ kind: 'sgmat', mt, nt, sgs, kc }))
  // Split K (engine: RWKV_MATMUL_SPLIT_K=1), 16, 32 and 64 tokens a workgroup.
  .concat(([1, 2, 4] as const).flatMap((mt) => [2, 4, 8].map((split): MatmulVariant => ({ kind: 'sgmat', mt, nt: 1, sgs: 4, kc: 64, split }))));

/** Staged subgroup-matrix configurations (mt × nt tiles per subgroup, sgm × sgn subgroups), unsplit and split. */
export const SGSTAGE_VARIANTS: MatmulVariant[] = (
  [
    [2, 2, 2, 2, 64], // the default for large products
    [1, 2, 4, 2, 32], // the default for small products
    [1, 2, 4, 2, 64],
    [2, 2, 4, 2, 64],
    [1, 4, 4, 1, 64],
    // More result tiles per subgroup: more multiply-adds per fragment loaded from workgroup memory.
    [4, 4, 1, 1, 64],
    [4, 4, 2, 1, 64],
    [2, 4, 2, 1, 64],
    [4, 2, 1, 2, 64],
  ] as const
).flatMap(([mt, nt, sgm, sgn, kc]) => [1, 2, 4].map((split): MatmulVariant => ({ kind: 'sgstage', mt, nt, sgm, sgn, kc, split })));

/** Tiled subgroup-matrix products (mt × nt tiles per subgroup, sgm × sgn subgroups), unsplit and split 2–8 ways. */
export const SGTILE_VARIANTS: MatmulVariant[] = (
  [
    [2, 2, 2, 2], // the default
    [1, 2, 4, 2],
    [2, 2, 1, 4],
    [1, 4, 4, 1],
  ] as const
).flatMap(([mt, nt, sgm, sgn]) => [1, 2, 4, 8].map((split): MatmulVariant => ({ kind: 'sgtile', mt, nt, sgm, sgn, split })));

/** Split-K on the f32-arithmetic tiles too (the 'f16' and 'f32' paths). */
export const GEMM_SPLIT_VARIANTS: MatmulVariant[] = [2, 4, 8].map((split) => ({ kind: 'gemm', tile: 64, split }));

/**
 * Worst relative L2 error against float64 a variant may show: f32 arithmetic on the f16 weights, and for
 * subgroup matrices the activations rounded to f16 as well (measured 2.1e-4–2.3e-4 on the H200).
 */
export const ERROR_BOUND = { f32: 1e-5, f16Inputs: 2e-3 };

const HANG_SECONDS = Number(process.env.MATMUL_HANG_SECONDS ?? 20);
const REFERENCE_ROWS = 12;

export function variantName(v: MatmulVariant): string {
  if (v.kind === 'vec') return `vec${v.tb}${v.lpr && v.lpr !== 32 ? `l${v.lpr}` : ''}`;
  const split = splitOf(v) > 1 ? `s${splitOf(v)}` : '';
  if (v.kind === 'gemm') return `gemm${v.tile}${split}`;
  if (v.kind === 'sgstage') return `sgstage${v.mt}x${v.nt}x${v.sgm}x${v.sgn}k${v.kc}${split}`;
  if (v.kind === 'sgtile') return `sgtile${v.mt}x${v.nt}x${v.sgm}x${v.sgn}${split}`;
  return `sgmat${v.mt}x${v.nt}x${v.sgs}k${v.kc}${split}`;
}

/** Standard normal values (Box–Muller) from a small deterministic generator. */
function gaussians(count: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0 || 1;
  const u = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i += 2) {
    const r = Math.sqrt(-2 * Math.log(u()));
    const a = 2 * Math.PI * u();
    out[i] = r * Math.cos(a) * scale;
    if (i + 1 < count) out[i + 1] = r * Math.sin(a) * scale;
  }
  return out;
}

function withTimeout<T>(p: Promise<T>, seconds: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${seconds} s`)), seconds * 1000);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

export interface MatmulRow {
  case: string;
  variant: string;
  /** Worst relative L2 error of a sampled row against float64 (f16 weights, f32 inputs). */
  relErr?: number;
  /** The bound relErr must stay under (ERROR_BOUND). */
  bound?: number;
  us?: number;
  tflops?: number;
  weightGBps?: number;
  error?: string;
  warnings?: string;
}

/** Runs every variant on every case; returns one row per (case, variant). */
export async function benchMatmul(
  gpu: GpuContext,
  opts: {
    cases?: MatmulCase[]; variants?: MatmulVariant[]; only?: RegExp; spanSeconds?: number; log?: (s: string) => void;
    /** 'int8': the same random weights quantised per row (engine/quant), the reference from the codes and scales. */
    precision?: 'f16' | 'int8';
  } = {},
): Promise<MatmulRow[]> {
  const { device } = gpu;
  const log = opts.log ?? console.log;
  const precision = opts.precision ?? 'f16';
  const base = { kernelPath: gpu.kernelPath, precision, subgroup32: gpu.subgroup32 };
  const variants: MatmulVariant[] = (opts.variants ?? ([
    { kind: 'vec', tb: 8 },
    ...VEC_LANE_VARIANTS,
    { kind: 'gemm', tile: 64 },
    { kind: 'gemm', tile: 16 },
    ...GEMM_SPLIT_VARIANTS,
    ...(gpu.kernelPath === 'subgroup-matrix' ? [...(precision === 'f16' ? [...SGMAT_VARIANTS, ...SGTILE_VARIANTS] : []), ...SGSTAGE_VARIANTS] : []),
  ] as MatmulVariant[])).filter((v) => !opts.only || opts.only.test(variantName(v)));
  const timer = new GpuSpanTimer(device);
  const out: MatmulRow[] = [];
  let partBuf: GPUBuffer | null = null;
  let xtBuf: GPUBuffer | null = null;
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  try {
    for (const c of opts.cases ?? MATMUL_CASES) {
      const name = `${c.n}x${c.k}xT${c.rows}`;
      progress(`matmul ${name}: data`);
      const padRows = Math.ceil(c.n / 64) * 64 - c.n;
      const wBits = f32ToF16(gaussians((c.n + padRows) * c.k, 11 + c.n + c.rows, 1 / Math.sqrt(c.k)));
      wBits.fill(0, c.n * c.k);
      const xs = gaussians(c.rows * c.k, 5 + c.k, 1);
      // The weights as the kernels read them, and as float64 for the reference.
      const wF = new Float64Array(c.n * c.k);
      let wWords: Uint16Array | Uint32Array = wBits;
      let scaleWord: number | undefined;
      if (precision === 'int8') {
        const packed = await packQuantizedGroup([{ name: 'W', data: wBits.subarray(0, c.n * c.k), n: c.n, k: c.k }], 'int8', 64);
        wWords = packed.words;
        scaleWord = packed.scaleWord;
        const halves = new Uint16Array(packed.words.buffer);
        for (let o = 0; o < c.n; o++) {
          const scale = f16BitsToF32(halves[2 * scaleWord + o]);
          for (let i = 0; i < c.k; i++) wF[o * c.k + i] = ((packed.words[(o * c.k + i) >> 2] << (24 - 8 * (i & 3))) >> 24) * scale;
        }
      } else {
        for (let i = 0; i < c.n * c.k; i++) wF[i] = f16BitsToF32(wBits[i]);
      }
      const wBuf = createBuffer(device, 'W', wWords.byteLength, S);
      device.queue.writeBuffer(wBuf, 0, wWords);
      const xBuf = createBuffer(device, 'x', xs.byteLength, S);
      device.queue.writeBuffer(xBuf, 0, xs);
      const yBytes = c.rows * c.n * 4;
      const yBuf = createBuffer(device, 'y', yBytes, S);
      const readBuf = device.createBuffer({ size: Math.ceil(yBytes / 16) * 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const batch = createBuffer(device, 'batch', 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(batch, 0, new Uint32Array([c.rows, 1, c.rows, 0]));
      const group: MatrixGroup = { buffer: wBuf, segs: [{ name: 'W', n: c.n, k: c.k, wOff: 0 }], format: precision, scaleWord };
      const u = groupUniform(name, group, [{ xOff: 0, yOff: 0 }], false);
      const uBuf = createBuffer(device, 'group', u.words.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      device.queue.writeBuffer(uBuf, 0, u.words);
      // Reference rows: spread over the batch, first and last included.
      const refRows = [...new Set(Array.from({ length: Math.min(REFERENCE_ROWS, c.rows) }, (_, i) =>
        Math.round((i * (c.rows - 1)) / Math.max(1, Math.min(REFERENCE_ROWS, c.rows) - 1))))];
      const ref = new Map<number, Float64Array>();
      for (const t of refRows) {
        const r = new Float64Array(c.n);
        for (let o = 0; o < c.n; o++) {
          let acc = 0;
          for (let k = 0; k < c.k; k++) acc += wF[o * c.k + k] * xs[t * c.k + k];
          r[o] = acc;
        }
        ref.set(t, r);
      }
      for (const v of variants) {
        const row: MatmulRow = { case: name, variant: variantName(v), bound: v.kind === 'sgmat' || v.kind === 'sgstage' || v.kind === 'sgtile' ? ERROR_BOUND.f16Inputs : ERROR_BOUND.f32 };
        out.push(row);
        try {
          progress(`matmul ${name}: ${row.variant} build`);
          const shader = matmulShader(v, base);
          device.pushErrorScope('validation');
          device.pushErrorScope('internal');
          const kernel = makeKernel(device, shader.parts, shader.constants, shader.bindings);
          const internal = await device.popErrorScope();
          const validation = await device.popErrorScope();
          if (validation || internal) throw new Error(`kernel build failed: ${(validation ?? internal)!.message}`);
          // A split product: its partial sums (poisoned too) and the reduction kernel, one bind group for both.
          const partFloats = splitScratchFloats(v, u.virtualRows, c.rows);
          partBuf?.destroy();
          partBuf = partFloats > 0 ? createBuffer(device, 'parts', partFloats * 4, S) : null;
          if (partBuf) device.queue.writeBuffer(partBuf, 0, new Float32Array(partFloats).fill(NaN));
          let reduceKernel: ReturnType<typeof makeKernel> | null = null;
          if (partBuf && reducesAfter(v)) {
            const r = splitReduceShader(v, base, c.rows);
            device.pushErrorScope('validation');
            reduceKernel = makeKernel(device, r.parts, r.constants, r.bindings);
            const rError = await device.popErrorScope();
            if (rError) throw new Error(`reduction kernel build failed: ${rError.message}`);
          }
          // A tiled product: its inputs as f16 blocks (binding 6, written by the tiling pass); the partial sums bound always.
          const tiled = v.kind === 'sgtile';
          xtBuf?.destroy();
          xtBuf = tiled ? createBuffer(device, 'tiled inputs', tiledInputHalves([c.k], c.rows) * 2, S) : null;
          const resources = [batch, wBuf, xBuf, yBuf, uBuf, ...(partBuf ? [partBuf] : []), ...(xtBuf ? [xtBuf] : [])];
          const bg = bindGroup(device, kernel, resources);
          const rbg = reduceKernel ? bindGroup(device, reduceKernel, resources) : null;
          let tileKernel: ReturnType<typeof makeKernel> | null = null;
          if (tiled) {
            const t = tileInputShader();
            device.pushErrorScope('validation');
            tileKernel = makeKernel(device, t.parts, t.constants, t.bindings);
            const tError = await device.popErrorScope();
            if (tError) throw new Error(`input tiling kernel build failed: ${tError.message}`);
          }
          const tbg = tileKernel ? bindGroup(device, tileKernel, resources) : null;
          const [tx, ty] = tileInputDispatch([c.k], c.rows);
          const [gx, gy, gz] = matmulDispatch(v, u.virtualRows, c.rows);
          const [rx, ry] = splitReduceDispatch(u.virtualRows, c.rows);
          const encode = (reps: number) => (enc: GPUCommandEncoder) => {
            const pass = enc.beginComputePass();
            for (let i = 0; i < reps; i++) {
              if (tileKernel) {
                pass.setPipeline(tileKernel.pipeline);
                pass.setBindGroup(0, tbg!);
                pass.dispatchWorkgroups(tx, ty);
              }
              pass.setPipeline(kernel.pipeline);
              pass.setBindGroup(0, bg);
              pass.dispatchWorkgroups(gx, gy, gz);
              if (reduceKernel) {
                pass.setPipeline(reduceKernel.pipeline);
                pass.setBindGroup(0, rbg!);
                pass.dispatchWorkgroups(rx, ry);
              }
            }
            pass.end();
          };
          // Poison, run once, check every element and the sampled rows.
          progress(`matmul ${name}: ${row.variant} check`);
          device.queue.writeBuffer(yBuf, 0, new Float32Array(c.rows * c.n).fill(NaN));
          device.pushErrorScope('validation');
          const enc = device.createCommandEncoder();
          encode(1)(enc);
          enc.copyBufferToBuffer(yBuf, 0, readBuf, 0, yBytes);
          device.queue.submit([enc.finish()]);
          const runError = await device.popErrorScope();
          if (runError) throw new Error(`dispatch failed: ${runError.message}`);
          await withTimeout(readBuf.mapAsync(GPUMapMode.READ), HANG_SECONDS, `${row.variant} on ${name}`);
          const y = new Float32Array(readBuf.getMappedRange(0, yBytes).slice(0));
          readBuf.unmap();
          const unwritten = y.findIndex((value) => !Number.isFinite(value));
          if (unwritten >= 0) throw new Error(`element ${unwritten} not written (or not finite)`);
          let worst = 0;
          for (const [t, r] of ref) {
            let num = 0;
            let den = 0;
            for (let o = 0; o < c.n; o++) {
              num += (y[t * c.n + o] - r[o]) ** 2;
              den += r[o] ** 2;
            }
            worst = Math.max(worst, Math.sqrt(num / den));
          }
          row.relErr = +worst.toExponential(2);
          if (!(worst < row.bound!)) throw new Error(`relative error ${row.relErr} against float64 exceeds ${row.bound}`);
          progress(`matmul ${name}: ${row.variant} time`);
          const reps = await calibrateRepetitions(timer, encode, opts.spanSeconds ?? 0.02, 2000);
          const spans: number[] = [];
          for (let i = 0; i < 3; i++) spans.push((await timer.time(encode(reps))) / reps);
          const sec = median(spans);
          row.us = +(sec * 1e6).toFixed(2);
          row.tflops = +((2 * c.n * c.k * c.rows) / sec / 1e12).toFixed(2);
          row.weightGBps = +((c.n * c.k * (precision === 'int8' ? 1 : 2)) / sec / 1e9).toFixed(0);
        } catch (e) {
          row.error = (e as Error).message.split('\n').slice(0, 6).join(' | ');
          log(`MATMUL CHECK FAILED: ${row.variant} on ${name}: ${row.error}`);
          if (/did not finish/.test(row.error)) {
            log(JSON.stringify(row));
            throw e; // the queue is stuck behind it: nothing else can be measured
          }
        }
        log(JSON.stringify(row));
      }
      for (const b of [wBuf, xBuf, yBuf, readBuf, batch, uBuf, partBuf, xtBuf]) b?.destroy();
      partBuf = null;
      xtBuf = null;
    }
  } finally {
    timer.dispose();
  }
  return out;
}

/** Throws, listing them, when any variant failed its check (build, run, every output written, error bound). */
export function checkMatmulRows(rows: MatmulRow[]): void {
  const failed = rows.filter((r) => r.error !== undefined);
  if (failed.length === 0) return;
  throw new Error(`matmul self-check: ${failed.length} of ${rows.length} variant runs failed:\n${failed.map((r) => `  ${r.case} ${r.variant}: ${r.error}`).join('\n')}`);
}

/** The fastest correct variant per case, as a short table. */
export function summarizeMatmul(rows: MatmulRow[]): string {
  const byCase = new Map<string, MatmulRow[]>();
  for (const r of rows) byCase.set(r.case, [...(byCase.get(r.case) ?? []), r]);
  const lines = ['case | best | µs | TFLOP/s | weight GB/s | rel err | others (µs)'];
  for (const [name, rs] of byCase) {
    const ok = rs.filter((r) => r.us !== undefined).sort((a, b) => a.us! - b.us!);
    const best = ok[0];
    if (!best) {
      lines.push(`${name} | none ran | ${rs.map((r) => `${r.variant}: ${r.error}`).join('; ')}`);
      continue;
    }
    const others = ok.slice(1).map((r) => `${r.variant} ${r.us}`).join(', ');
    lines.push(`${name} | ${best.variant} | ${best.us} | ${best.tflops} | ${best.weightGBps} | ${best.relErr} | ${others}`);
  }
  return lines.join('\n');
}

if (require.main === module) {
  (async () => {
    const gpu = await acquireGpu({ exactTimestamps: true });
    console.log(`adapter: ${gpu.adapterName}; kernel path ${gpu.kernelPath}; toggles ${gpu.dawnToggles.join(',')}`);
    const smoke = process.argv.includes('--smoke');
    // --only REGEX: the variants whose names match (e.g. 'sgstage|sgmat1x1x4k64'), --cases-min-rows N / --cases-max-rows N: cases of N+ / at most N tokens.
    const arg = (name: string) => { const i = process.argv.indexOf(name); return i >= 0 ? process.argv[i + 1] : undefined; };
    const only = arg('--only') ? new RegExp(arg('--only')!) : undefined;
    const minRows = Number(arg('--cases-min-rows') ?? 0);
    const maxRows = Number(arg('--cases-max-rows') ?? Infinity);
    const cases = (smoke ? SMOKE_MATMUL_CASES : MATMUL_CASES).filter((c) => (c.rows >= minRows && c.rows <= maxRows) || c.n < 512);
    const precision = arg('--precision') === 'int8' ? 'int8' : 'f16';
    const rows = await benchMatmul(gpu, { cases, only, precision });
    const i = process.argv.indexOf('--out');
    if (i >= 0) fs.writeFileSync(process.argv[i + 1], JSON.stringify(rows, null, 1));
    console.log(summarizeMatmul(rows));
    checkMatmulRows(rows);
    process.exit(0);
  })().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
