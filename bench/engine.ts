// Engine throughput on random models of the official RWKV-7 shapes: decode tokens/s and step ms at batch 1, 8,
// 32 and 64 (with full rows read back and with 'top', as generate() runs), prefill tokens/s with chunks of 128 and
// 512, the kernel path, and the weight bytes a batch-1 step reads per second as a fraction of the WGSL read probe (a
// kernel reading a large buffer, the HBM ceiling a kernel can reach) and of Dawn's buffer copy, both measured in the
// same run.

import { timeSteps, warmUp } from './warm-up';
import { createBackend, type Backend } from '../engine/backend';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import type { DrawJob } from '../engine/types';
import type { GpuContext } from '../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { measureCopyBandwidth } from './copy-bandwidth';
import { benchReadProbe, probeBytesFor } from './device/read-bandwidth';

export interface ModelShape {
  name: string;
  nLayer: number;
  nEmbd: number;
}

export const OFFICIAL_SHAPES: ModelShape[] = [
  { name: '0.1B', nLayer: 12, nEmbd: 768 },
  { name: '0.4B', nLayer: 24, nEmbd: 1024 },
  { name: '1.5B', nLayer: 24, nEmbd: 2048 },
];

/** A tiny shape for a smoke run on a CPU driver. */
export const SMOKE_SHAPES: ModelShape[] = [{ name: 'tiny', nLayer: 2, nEmbd: 128 }];

/** Steps a draw call (Scheduler drawSteps) the engine section measures. */
export const DRAW_STEPS = [4, 8] as const;

/**
 * Tokens/s of `batch` slots decoding in draw calls of `steps` steps as the scheduler runs them: one call queued behind
 * the one being read back (continueDraws) while the call's penalty room lasts, the host's samplers told every draw.
 */
async function drawTps(be: Backend, batch: number, steps: number, secs: number, tok: (i: number) => number, nextIndex: () => number): Promise<number> {
  const V = be.info.vocabSize;
  const samplers = Array.from({ length: batch }, (_, s) => new TokenSampler(resolveSamplerOptions({ seed: s + 1 }), V, (id) => id));
  let next = samplers.map(() => tok(nextIndex()));
  let room = 0;
  let pending: Promise<Int32Array> | null = null;
  const take = (rows: Int32Array) => {
    next = next.map((_, slot) => {
      for (let s = 0; s < steps; s++) samplers[slot].recordDrawn(rows[s * batch + slot]);
      return rows[(steps - 1) * batch + slot];
    });
  };
  const fresh = () => {
    room = be.continueDraws ? (be.drawContinuationSteps ?? 0) : 0;
    const jobs: DrawJob[] = next.map((token, slot) => ({ slot, token, draw: samplers[slot].drawParams(be.topCapacity ?? 0)!, uniforms: samplers[slot].takeUniforms(steps) }));
    return be.runDraws!(jobs, steps);
  };
  const r = await timeSteps(secs, 3, async () => {
    const current = pending ?? fresh();
    let queued: Promise<Int32Array> | null = null;
    if (room >= steps) {
      queued = be.continueDraws!(samplers.map((sm) => sm.takeUniforms(steps)), steps);
      room -= steps;
    }
    take(await current);
    pending = queued;
  });
  if (pending) take(await pending);
  return (batch * steps * r.reps) / r.seconds;
}

export async function benchEngine(
  gpu: GpuContext,
  shapes: ModelShape[],
  opts: { vocab?: number; seconds?: number; crossover?: boolean; log?: (s: string) => void } = {},
): Promise<Record<string, number | string>> {
  const log = opts.log ?? console.log;
  const secs = opts.seconds ?? 2;
  const probeBytes = probeBytesFor(gpu.device);
  const copy = await measureCopyBandwidth(gpu.device, probeBytes);
  // Dawn's copyBufferToBuffer is far below what a kernel can read on some drivers (a fifth on the H200),
  // so the weight-read rate is also put against a plain WGSL read of the same memory.
  const read = await benchReadProbe(gpu.device, probeBytes);
  const results: Record<string, number | string> = {
    adapter: gpu.adapterName,
    kernelPath: gpu.kernelPath,
    dawnToggles: gpu.dawnToggles.join(','),
    copyGBps: +copy.gbPerS.toFixed(1),
    wgslReadGBps: +read.best.gbPerS.toFixed(1),
    wgslReadBest: `${read.best.workgroups} workgroups, unroll ${read.best.unroll}`,
  };
  log(
    `kernel path ${gpu.kernelPath}; copy bandwidth (read+write): ${copy.gbPerS.toFixed(1)} GB/s; WGSL read probe: ` +
      `${read.best.gbPerS.toFixed(1)} GB/s (${results.wgslReadBest})`,
  );
  for (const shape of shapes) {
    const t0 = performance.now();
    const ck = randomRwkv7Checkpoint({ nLayer: shape.nLayer, nEmbd: shape.nEmbd, vocabSize: opts.vocab ?? 65536, dtype: 'f16', seed: 7 });
    const be = await createBackend({ model: ck, slots: 64, precision: 'f16', maxTokens: 512, maxRows: 64, gpu });
    const load = (performance.now() - t0) / 1000;
    const C = shape.nEmbd;
    const V = be.info.vocabSize;
    // A decode step reads every weight once except the embedding table, of which it reads one row per token.
    const stepBytes = be.weightBytes - V * C * 2;
    const tok = (i: number) => (i * 7919) % V;
    let n = 0;
    // Every figure below is of the warm GPU (warm-up.ts).
    await warmUp(() => be.run([{ slot: 0, tokens: [tok(n++)], output: 'last' }]));
    const dec1 = await timeSteps(secs, 10, () => be.run([{ slot: 0, tokens: [tok(n++)], output: 'last' }]));
    const dec1Tps = dec1.reps / dec1.seconds;
    // Batch 1 as generate() runs it: the row reduced on the GPU to its top candidates (the read-back a few KiB).
    const dec1Top = await timeSteps(secs, 10, () => be.run([{ slot: 0, tokens: [tok(n++)], output: 'top' }]));
    const dec1TopTps = dec1Top.reps / dec1Top.seconds;
    const jobs32 = () => Array.from({ length: 32 }, (_, s) => ({ slot: s, tokens: [tok(n++)], output: 'last' as const }));
    const dec32 = await timeSteps(secs, 5, () => be.run(jobs32()));
    const dec32Tps = (32 * dec32.reps) / dec32.seconds;
    // The same steps with each row reduced on the GPU to its top candidates ('top', what generate() uses).
    const batchTps = async (batch: number, output: 'last' | 'top') => {
      const jobs = () => Array.from({ length: batch }, (_, s) => ({ slot: s, tokens: [tok(n++)], output }));
      const r = await timeSteps(secs, 5, () => be.run(jobs()));
      return (batch * r.reps) / r.seconds;
    };
    const dec8 = await batchTps(8, 'last');
    const dec8Top = await batchTps(8, 'top');
    const dec32Top = await batchTps(32, 'top');
    const dec64 = await batchTps(64, 'last');
    const dec64Top = await batchTps(64, 'top');
    // The same batches as the scheduler runs them with drawSteps: DRAW_STEPS steps a call, each token drawn on the
    // GPU (ai00's default sampler: nucleus with presence / frequency penalties), one call queued behind the one read.
    const draws: Record<string, number> = {};
    if (be.runDraws && (be.maxDrawSteps ?? 0) > 0) {
      for (const steps of DRAW_STEPS) {
        for (const batch of [1, 8, 32, 64]) draws[`${shape.name}.decodeB${batch}Draw${steps}TokPerS`] = +(await drawTps(be, batch, steps, secs, tok, () => n++)).toFixed(1);
      }
    }
    const prefill = async (chunk: number) => {
      const toks = Array.from({ length: chunk }, (_, i) => tok(i + n));
      const r = await timeSteps(secs, 3, () => be.run([{ slot: 1, tokens: toks, output: 'last' }]));
      return (chunk * r.reps) / r.seconds;
    };
    const pre128 = await prefill(128);
    const pre512 = await prefill(512);
    // Where the streaming matrix kernel (weights once per 8 tokens) stops beating the tiled ones.
    const crossover: Record<string, number> = {};
    if (opts.crossover) {
      const dflt = [be.vecMaxRows, be.gemmTile] as const;
      for (const batch of [8, 16, 32, 64]) {
        for (const [label, vecMax, tile] of [['tiled', 0, 64], ['tiled16', 0, 16], ['streaming', 64, 64]] as const) {
          be.vecMaxRows = vecMax;
          be.gemmTile = tile;
          const jobs = () => Array.from({ length: batch }, (_, s) => ({ slot: s, tokens: [tok(n++)], output: 'last' as const }));
          const r = await timeSteps(secs / 2, 3, () => be.run(jobs()));
          crossover[`${shape.name}.decodeB${batch}.${label}TokPerS`] = +((batch * r.reps) / r.seconds).toFixed(0);
        }
      }
      for (const tile of [64, 16] as const) {
        be.gemmTile = tile;
        crossover[`${shape.name}.prefill128.tile${tile}TokPerS`] = +(await prefill(128)).toFixed(0);
      }
      [be.vecMaxRows, be.gemmTile] = dflt;
      log(`${shape.name} kernel crossover: ${JSON.stringify(crossover)}`);
    }
    const bwFrac = (stepBytes * dec1Tps) / (copy.gbPerS * 1e9);
    const readFrac = (stepBytes * dec1Tps) / (read.best.gbPerS * 1e9);
    const p = shape.name;
    const stepMs = (batch: number, tps: number) => +((1000 * batch) / tps).toFixed(2);
    Object.assign(results, {
      [`${p}.kernels`]: be.kernelPath,
      [`${p}.loadSeconds`]: +load.toFixed(1),
      [`${p}.decodeB8TokPerS`]: +dec8.toFixed(1),
      [`${p}.decodeB8TopTokPerS`]: +dec8Top.toFixed(1),
      [`${p}.stepMs.b1`]: stepMs(1, dec1Tps),
      [`${p}.stepMs.b8`]: stepMs(8, dec8),
      [`${p}.stepMs.b32`]: stepMs(32, dec32Tps),
      [`${p}.stepMs.b64`]: stepMs(64, dec64),
      [`${p}.stepMs.prefill512`]: stepMs(512, pre512),
      [`${p}.decodeB1TokPerS`]: +dec1Tps.toFixed(1),
      [`${p}.decodeB1TopTokPerS`]: +dec1TopTps.toFixed(1),
      [`${p}.decodeB32TokPerS`]: +dec32Tps.toFixed(1),
      [`${p}.decodeB32TopTokPerS`]: +dec32Top.toFixed(1),
      [`${p}.decodeB64TokPerS`]: +dec64.toFixed(1),
      [`${p}.decodeB64TopTokPerS`]: +dec64Top.toFixed(1),
      ...draws,
      [`${p}.prefill128TokPerS`]: +pre128.toFixed(0),
      [`${p}.prefill512TokPerS`]: +pre512.toFixed(0),
      [`${p}.decodeB1WeightGBps`]: +((stepBytes * dec1Tps) / 1e9).toFixed(1),
      [`${p}.decodeB1FractionOfCopyBandwidth`]: +bwFrac.toFixed(3),
      [`${p}.decodeB1FractionOfWgslRead`]: +readFrac.toFixed(3),
      ...crossover,
    });
    log(
      `${p}: load ${load.toFixed(1)}s, decode b1 ${dec1Tps.toFixed(1)} tok/s, ${stepMs(1, dec1Tps)} ms a step (${((stepBytes * dec1Tps) / 1e9).toFixed(0)} GB/s weights = ` +
        `${(100 * readFrac).toFixed(1)}% of the WGSL read probe, ${(100 * bwFrac).toFixed(1)}% of copy; top ${dec1TopTps.toFixed(1)} tok/s), b8 ${dec8.toFixed(0)} tok/s (top ${dec8Top.toFixed(0)}), ` +
        `b32 ${dec32Tps.toFixed(0)} tok/s (x${(dec32Tps / dec1Tps).toFixed(1)}), b64 ${dec64.toFixed(0)} tok/s (${stepMs(64, dec64)} ms), ` +
        `b32/b64 with full rows ${dec32Tps.toFixed(0)}/${dec64.toFixed(0)} vs top ${dec32Top.toFixed(0)}/${dec64Top.toFixed(0)} tok/s, ` +
        `prefill c128 ${pre128.toFixed(0)} tok/s, c512 ${pre512.toFixed(0)} tok/s (${stepMs(512, pre512)} ms); kernels: ${be.kernelPath}`,
    );
    if (Object.keys(draws).length) log(`${p} drawn on the GPU, tok/s: ${Object.entries(draws).map(([k, v]) => `${k.slice(p.length + 1)} ${v.toFixed(0)}`).join(', ')}`);
    be.dispose();
  }
  return results;
}
