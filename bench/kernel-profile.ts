// `npm run bench -- --sections profile`: where a step's GPU time goes, per kernel, on random models of the
// official shapes (a tiny one on a CPU driver): decode at batch 1, 8, 32 and 64 and a 512-token prefill chunk. Each
// dispatch runs in a timed pass of its own (engine/gpu/kernel-profiler.ts); the unprofiled step time of the
// same shape is printed beside the kernels' sum, which tells how much of a step is not GPU work at all.
// --profile-shapes 0.1B,1.5B chooses shapes; --profile-steps N the profiled steps per case (default 10); --profile-top N
// the kernels printed a case (default 12; the JSON keeps all); --profile-repeat N each dispatch N times in its pass
// (times divided by N: products then read their weights from L2 after the first, engine/gpu/kernel-profiler.ts).
// Decode at batch 1 and 8 runs twice: with the fused decode step (the default up to its job limit) and with the
// separate kernels ("separate"), so one run shows what the fusion saves in dispatches and step time.

import { CASE_HOLD_SECONDS, timeSteps, warmUp } from './warm-up';
import { createBackend } from '../engine/backend';
import type { GpuContext } from '../engine/gpu/device';
import { KernelProfiler } from '../engine/gpu/kernel-profiler';
import { StepSpan } from '../engine/gpu/step-span';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import type { SlotJob } from '../engine/types';
import { OFFICIAL_SHAPES, SMOKE_SHAPES } from './engine';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** The shapes a profiling section runs (--profile-shapes), its steps a case (--profile-steps, default 10). */
function profileShapes(onGpu: boolean) {
  const wanted = arg('profile-shapes')?.split(',');
  return {
    shapes: (onGpu ? OFFICIAL_SHAPES : SMOKE_SHAPES).filter((s) => !wanted || wanted.includes(s.name)),
    steps: Number(arg('profile-steps') ?? 10),
  };
}

/** A random f16 model of `shape` on the RWKV-7 GPU runtime, and a source of token ids for its jobs. */
async function profiledRuntime(gpu: GpuContext, onGpu: boolean, shape: (typeof OFFICIAL_SHAPES)[number]) {
  const ck = randomRwkv7Checkpoint({ nLayer: shape.nLayer, nEmbd: shape.nEmbd, vocabSize: onGpu ? 65536 : 4096, dtype: 'f16', seed: 7 });
  const be = await createBackend({ model: ck, slots: 64, precision: 'f16', maxTokens: 512, maxRows: 64, gpu });
  const runtime = be as unknown as Rwkv7Runtime;
  if (!('profiler' in runtime)) throw new Error('kernel profiles run on the RWKV-7 GPU runtime only');
  const V = be.info.vocabSize;
  let n = 0;
  return { be, runtime, tok: () => (n++ * 7919) % V };
}

export async function profileKernels(gpu: GpuContext, onGpu: boolean): Promise<Record<string, unknown>> {
  const { shapes, steps } = profileShapes(onGpu);
  const out: Record<string, unknown> = {};
  for (const shape of shapes) {
    const { be, runtime, tok } = await profiledRuntime(gpu, onGpu, shape);
    await warmUp(() => be.run([{ slot: 0, tokens: [tok()], output: 'last' }]));
    const decode = (b: number) => () => Array.from({ length: b }, (_, s) => ({ slot: s, tokens: [tok()], output: 'last' as const }));
    const fused = runtime.fuseDecodeJobs;
    const cases: [string, () => SlotJob[], number][] = [
      ['decode b1', decode(1), fused],
      ['decode b1 separate', decode(1), 0],
      ['decode b8', decode(8), fused],
      ['decode b8 separate', decode(8), 0],
      ['decode b32', decode(32), fused],
      ['decode b64', decode(64), fused],
      ['prefill 512', () => [{ slot: 1, tokens: Array.from({ length: 512 }, tok), output: 'last' }], fused],
    ];
    for (const [name, jobs, fuseJobs] of cases) {
      runtime.fuseDecodeJobs = fuseJobs;
      // Pipelines and recorded passes, the clock held up, then the unprofiled step time (warm-up.ts).
      const timed = await timeSteps(0, steps, () => be.run(jobs()));
      const stepMs = (1000 * timed.seconds) / timed.reps;
      // Again just before the profiled steps: the profiler's own setup is not GPU work.
      await warmUp(() => be.run(jobs()), CASE_HOLD_SECONDS);
      const profiler = new KernelProfiler(gpu.device, 2048, Number(arg('profile-repeat') ?? 1));
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
      for (const k of kernels.slice(0, Number(arg('profile-top') ?? 12))) {
        console.log(`  ${(100 * k.share).toFixed(1).padStart(5)}%  ${(k.microsPerStep / 1000).toFixed(3)} ms  ×${k.dispatchesPerStep}  ${k.label}`);
      }
      out[`${shape.name} ${name}`] = { stepMs: +stepMs.toFixed(3), kernelMs: +kernelMs.toFixed(3), kernels };
    }
    be.dispose();
  }
  return out;
}

/** Kernel classes the ablation leaves out, by label (runtime.ts labels: mm_*:<product>[:reduce|:tile], rwkv7_*, ...). */
const ABLATIONS: [string, RegExp][] = [
  ['without products', /^mm_/],
  ['without split reductions', /:reduce$/],
  ['without WKV / fused time mix', /^rwkv7_(wkv|tmix)/],
  ['without norms + shift', /^(ln_shift|layer_norm)/],
  ['products only', /^(?!mm_)/],
];

/**
 * `--sections ablation`: GPU span of whole steps (engine/gpu/step-span.ts) with kernel classes left out, for decode at
 * batch 1 and 64 and a 512-token chunk; what a class costs inside the step's chain is the difference. Also: the host's
 * side of the same steps (encoding and submitting, waiting, reading back), batch-1 steps in windows straight after
 * the model's upload, and when the step's commands are submitted (Rwkv7Runtime.submitSchedule).
 */
export async function ablateKernels(gpu: GpuContext, onGpu: boolean): Promise<Record<string, unknown>> {
  const { shapes, steps } = profileShapes(onGpu);
  const out: Record<string, unknown> = {};
  for (const shape of shapes) {
    const { be, runtime, tok } = await profiledRuntime(gpu, onGpu, shape);
    const decode = (b: number, output: 'last' | 'top') => () => Array.from({ length: b }, (_, s) => ({ slot: s, tokens: [tok()], output }));

    /** `count` steps of `jobs`: wall ms a step, GPU span µs a step, host µs a step (encode + submit, wait, after). */
    const measure = async (jobs: () => SlotJob[], count: number, skip: RegExp | null = null) => {
      const span = new StepSpan(gpu.device, skip);
      const host = { encode: 0, wait: 0, after: 0 };
      runtime.stepSpan = span;
      runtime.onHostTimes = (t) => {
        host.encode += t.submitted - t.start;
        host.wait += t.mapped - t.submitted;
        host.after += t.done - t.mapped;
      };
      let wall = 0;
      try {
        for (let i = 0; i < count; i++) {
          const t0 = performance.now();
          await be.run(jobs());
          wall += performance.now() - t0;
          await span.collect();
        }
      } finally {
        runtime.stepSpan = null;
        runtime.onHostTimes = null;
      }
      const r = {
        wallMs: +(wall / count).toFixed(3),
        gpuUs: +span.microsPerStep().toFixed(1),
        encodeUs: +((1000 * host.encode) / count).toFixed(1),
        waitUs: +((1000 * host.wait) / count).toFixed(1),
        afterUs: +((1000 * host.after) / count).toFixed(1),
      };
      span.dispose();
      return r;
    };

    // Straight after the upload: batch-1 steps in windows (wall ms a step / GPU µs a step).
    const windows: string[] = [];
    for (let w = 0; w < 12; w++) {
      const r = await measure(decode(1, 'last'), 25);
      windows.push(`${r.wallMs}/${r.gpuUs}`);
    }
    console.log(`${shape.name} after the upload, 12 windows of 25 batch-1 steps (wall ms / GPU µs a step): ${windows.join(' ')}`);
    out[`${shape.name} after upload`] = windows;

    const cases: [string, () => SlotJob[], number, number][] = [
      ['decode b1', decode(1, 'last'), 1, 1],
      ['decode b1 top', decode(1, 'top'), 1, 1],
      ['decode b64 top', decode(64, 'top'), 64, 64],
      ['prefill 512', () => [{ slot: 1, tokens: Array.from({ length: 512 }, tok), output: 'last' }], 512, 1],
    ];
    for (const [name, jobs, tokens, count] of cases) {
      const labels = runtime.dispatchLabels(tokens, count, count);
      for (let i = 0; i < steps; i++) await be.run(jobs());
      const row: Record<string, unknown> = { all: await measure(jobs, steps) };
      for (const [what, skip] of ABLATIONS) {
        const r = await measure(jobs, steps, skip);
        row[`${what} (${labels.filter((l) => !skip.test(l)).length} of ${labels.length})`] = r.gpuUs;
      }
      console.log(`${shape.name} ${name}: ${JSON.stringify(row)}`);
      out[`${shape.name} ${name}`] = row;
    }

    // When the commands go to the GPU, batch 1 ('top', as generate() runs).
    const schedules: [number, number][] = [[4, 4], [1, 4], [1, 2], [2, 8], [1, 1000]];
    const bySchedule: Record<string, unknown> = {};
    for (const [first, every] of schedules) {
      runtime.submitSchedule = { firstSubmitLayers: first, layersPerSubmit: every };
      for (let i = 0; i < steps; i++) await be.run(decode(1, 'top')());
      bySchedule[`${first}+${every}`] = await measure(decode(1, 'top'), steps);
    }
    runtime.submitSchedule = { firstSubmitLayers: 4, layersPerSubmit: 4 };
    console.log(`${shape.name} submit schedules (first submit after N layers + every M), batch 1 top: ${JSON.stringify(bySchedule)}`);
    out[`${shape.name} submit schedules`] = bySchedule;
    be.dispose();
  }
  return out;
}

export function registerSection(register: (name: string, section: (ctx: { gpu: GpuContext; onGpu: boolean }) => Promise<Record<string, unknown>>) => void): void {
  register('profile', ({ gpu, onGpu }) => profileKernels(gpu, onGpu));
  register('ablation', ({ gpu, onGpu }) => ablateKernels(gpu, onGpu));
}
