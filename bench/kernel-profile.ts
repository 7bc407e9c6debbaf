// `npm run bench -- --sections profile`: where a step's GPU time goes, per kernel, on random models of the
// official shapes (a tiny one on a CPU driver): decode at batch 1 and 64 and a 512-token prefill chunk. Each
// dispatch runs in a timed pass of its own (engine/gpu/kernel-profiler.ts); the unprofiled step time of the
// same shape is printed beside the kernels' sum, which tells how much of a step is not GPU work at all.
// --profile-shapes 0.1B,1.5B chooses shapes; --profile-steps N the profiled steps per case (default 10).
// Decode at batch 1 and 8 runs twice: with the fused decode step (the default up to its job limit) and with the
// separate kernels ("separate"), so one run shows what the fusion saves in dispatches and step time.

import { createBackend } from '../engine/backend';
import type { GpuContext } from '../engine/gpu/device';
import { KernelProfiler } from '../engine/gpu/kernel-profiler';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import type { SlotJob } from '../engine/types';
import { OFFICIAL_SHAPES, SMOKE_SHAPES } from './engine';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

export async function profileKernels(gpu: GpuContext, onGpu: boolean): Promise<Record<string, unknown>> {
  const wanted = arg('profile-shapes')?.split(',');
  const shapes = (onGpu ? OFFICIAL_SHAPES : SMOKE_SHAPES).filter((s) => !wanted || wanted.includes(s.name));
  const steps = Number(arg('profile-steps') ?? 10);
  const out: Record<string, unknown> = {};
  for (const shape of shapes) {
    const ck = randomRwkv7Checkpoint({ nLayer: shape.nLayer, nEmbd: shape.nEmbd, vocabSize: onGpu ? 65536 : 4096, dtype: 'f16', seed: 7 });
    const be = await createBackend({ model: ck, slots: 64, precision: 'f16', maxTokens: 512, maxRows: 64, gpu });
    const runtime = be as unknown as Rwkv7Runtime;
    if (!('profiler' in runtime)) throw new Error('kernel profiling runs on the RWKV-7 GPU runtime only');
    const V = be.info.vocabSize;
    let n = 0;
    const tok = () => (n++ * 7919) % V;
    const decode = (b: number) => () => Array.from({ length: b }, (_, s) => ({ slot: s, tokens: [tok()], output: 'last' as const }));
    const fused = runtime.fuseDecodeJobs;
    const cases: [string, () => SlotJob[], number][] = [
      ['decode b1', decode(1), fused],
      ['decode b1 separate', decode(1), 0],
      ['decode b8', decode(8), fused],
      ['decode b8 separate', decode(8), 0],
      ['decode b64', decode(64), fused],
      ['prefill 512', () => [{ slot: 1, tokens: Array.from({ length: 512 }, tok), output: 'last' }], fused],
    ];
    for (const [name, jobs, fuseJobs] of cases) {
      runtime.fuseDecodeJobs = fuseJobs;
      await be.run(jobs()); // warm-up: pipelines and recorded passes
      const t0 = performance.now();
      for (let i = 0; i < steps; i++) await be.run(jobs());
      const stepMs = (performance.now() - t0) / steps;
      const profiler = new KernelProfiler(gpu.device);
      runtime.profiler = profiler;
      try {
        for (let i = 0; i < steps; i++) {
          await be.run(jobs());
          await profiler.collect();
        }
      } finally {
        runtime.profiler = null;
      }
      const kernels = profiler.report();
      profiler.dispose();
      const kernelMs = kernels.reduce((a, k) => a + k.microsPerStep, 0) / 1000;
      console.log(`${shape.name} ${name}: step ${stepMs.toFixed(2)} ms unprofiled; kernels ${kernelMs.toFixed(2)} ms in ${kernels.reduce((a, k) => a + k.dispatchesPerStep, 0)} dispatches`);
      for (const k of kernels.slice(0, 12)) {
        console.log(`  ${(100 * k.share).toFixed(1).padStart(5)}%  ${(k.microsPerStep / 1000).toFixed(3)} ms  ×${k.dispatchesPerStep}  ${k.label}`);
      }
      out[`${shape.name} ${name}`] = { stepMs: +stepMs.toFixed(3), kernelMs: +kernelMs.toFixed(3), kernels };
    }
    be.dispose();
  }
  return out;
}

export function registerSection(register: (name: string, section: (ctx: { gpu: GpuContext; onGpu: boolean }) => Promise<Record<string, unknown>>) => void): void {
  register('profile', ({ gpu, onGpu }) => profileKernels(gpu, onGpu));
}
