// The GPU top-logits reduction (output 'top') alone: time per call for 1, 8 and 64 rows of 65536 logits,
// against a round trip that only copies the results back, for 1 and 8 histogram copies in the kernel.
// Rows are model-like logits (normal, spread 3) so most values share a few exponents, the hard case for
// the radix histogram.

import { createBuffer } from '../engine/gpu/kernel';
import type { GpuContext } from '../engine/gpu/device';
import { TopLogitsReducer } from '../engine/rwkv7/top-logits';

async function timeCalls(seconds: number, fn: () => Promise<void>): Promise<number> {
  for (let i = 0; i < 3; i++) await fn();
  let reps = 0;
  const start = performance.now();
  while (performance.now() - start < seconds * 1000 || reps < 5) {
    await fn();
    reps++;
  }
  return ((performance.now() - start) * 1000) / reps;
}

/** The results of the 8 rows just reduced must be the rows' largest values, max and normalizer. */
async function verify(reducer: TopLogitsReducer, staging: GPUBuffer, rows: Float32Array, V: number): Promise<void> {
  await staging.mapAsync(GPUMapMode.READ, 0, reducer.bytes(8));
  const words = new Uint32Array(staging.getMappedRange(0, reducer.bytes(8)).slice(0));
  staging.unmap();
  for (let r = 0; r < 8; r++) {
    const row = rows.subarray(r * V, (r + 1) * V);
    const top = TopLogitsReducer.parse(words, reducer.stride, r);
    const sorted = Float32Array.from(row).sort().reverse();
    let sum = 0;
    for (const x of row) sum += Math.exp(x - sorted[0]);
    const want = sorted.subarray(0, reducer.capacity);
    if (top.logits.length !== want.length || top.logits.some((x, j) => x !== want[j]) || top.max !== sorted[0] || Math.abs(top.logZ - Math.log(sum)) > 1e-4)
      throw new Error(`top-logits kernel gave a wrong result for row ${r}`);
  }
}

export async function benchTopLogits(gpu: GpuContext, opts: { vocab: number; seconds: number }): Promise<Record<string, number>> {
  const { device } = gpu;
  const V = opts.vocab;
  const maxRows = 64;
  let s = 12345;
  const normal = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const u = (s + 1) / 2 ** 32;
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return Math.sqrt(-2 * Math.log(u)) * Math.cos((2 * Math.PI * s) / 2 ** 32);
  };
  const logits = createBuffer(device, 'bench-logits', maxRows * V * 4, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST);
  const pristine = Float32Array.from({ length: maxRows * V }, () => 3 * normal());
  device.queue.writeBuffer(logits, 0, pristine);
  const results: Record<string, number> = {};
  for (const copies of [1, 8]) {
    const reducer = new TopLogitsReducer(device, V, maxRows, logits, copies);
    const staging = device.createBuffer({ size: reducer.bytes(maxRows), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    for (const rows of [1, 8, 64]) {
      const call = (reduce: boolean) => async () => {
        const enc = device.createCommandEncoder();
        if (reduce) reducer.encode(enc, Array.from({ length: rows }, (_, i) => ({ logitsRow: i, adjust: undefined, out: i })));
        reducer.copyOut(enc, staging, 0, rows);
        device.queue.submit([enc.finish()]);
        await staging.mapAsync(GPUMapMode.READ, 0, reducer.bytes(rows));
        staging.unmap();
      };
      if (rows === 8) await call(true)().then(() => verify(reducer, staging, pristine.subarray(0, 8 * V), V));
      const withKernel = await timeCalls(opts.seconds, call(true));
      const copyOnly = await timeCalls(opts.seconds / 2, call(false));
      results[`copies${copies}.rows${rows}.callUs`] = +withKernel.toFixed(1);
      results[`copies${copies}.rows${rows}.kernelUs`] = +(withKernel - copyOnly).toFixed(1);
      if (copies === 1) results[`rows${rows}.roundTripUs`] = +copyOnly.toFixed(1);
    }
    staging.destroy();
    reducer.dispose();
  }
  logits.destroy();
  return results;
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: (ctx: { gpu: GpuContext; onGpu: boolean; seconds: number }) => Promise<Record<string, unknown>>) => void): void {
  register('top', ({ gpu, onGpu, seconds }) => benchTopLogits(gpu, { vocab: onGpu ? 65536 : 4096, seconds: Math.min(seconds, 1) }));
}
