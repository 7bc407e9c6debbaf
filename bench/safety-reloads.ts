// Reload safety: acquire and release the shared engine of the bundled model again and again (what every
// redeploy of a flow does) and report the process memory after the first and after the last reload. On a
// CPU driver (lavapipe) GPU memory is host memory, so RSS shows a leaked device or buffer directly; on a real
// GPU, Dawn exposes no memory figure, and RSS still shows the host side of a leaked device (its staging and
// mapped memory, the driver's bookkeeping).
//
// Run alone: node --expose-gc dist/bench/safety-reloads.js [reloads]

import type { EngineConfig } from '../engine/api';
import { acquireEngine } from '../engine/shared-engine';

function megabytes(bytes: number): number {
  return Math.round((bytes / (1024 * 1024)) * 10) / 10;
}

function memory() {
  // A collection first, where the process allows it, so the figure is what is really held.
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { rssMB: megabytes(m.rss), externalMB: megabytes(m.external), heapUsedMB: megabytes(m.heapUsed) };
}

/** One redeploy: take a lease, use the engine once (so its pipelines and staging buffers exist), release. */
async function reload(config: EngineConfig): Promise<void> {
  const lease = await acquireEngine(config);
  try {
    for await (const _ of lease.engine.generate({ prompt: 'The', maxTokens: 2, sampler: { temperature: 0 } })) {
      // drain the stream
    }
  } finally {
    await lease.release();
  }
}

export async function measureReloadSafety(opts: { reloads: number } = { reloads: 50 }): Promise<Record<string, unknown>> {
  const reloads = Math.max(2, Math.floor(opts.reloads ?? 50));
  // The allocators (glibc's arenas, the driver's) reach their high-water mark over the first reloads and keep
  // it; a leak shows as growth after that. Measured on lavapipe: flat after about 10 reloads.
  const warmup = Math.min(10, reloads - 1);
  const config: EngineConfig = { maxBatch: 2 };
  const started = Date.now();
  await reload(config);
  const afterFirst = memory();
  for (let i = 1; i < warmup; i++) await reload(config);
  const afterWarmup = memory();
  for (let i = warmup; i < reloads; i++) await reload(config);
  const afterLast = memory();
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    reloads,
    afterFirst,
    [`after${warmup}`]: afterWarmup,
    afterLast,
    rssGrowthMB: round(afterLast.rssMB - afterFirst.rssMB),
    rssGrowthPerReloadMB: round((afterLast.rssMB - afterFirst.rssMB) / (reloads - 1)),
    rssGrowthPerReloadAfterWarmupMB: reloads > warmup ? round((afterLast.rssMB - afterWarmup.rssMB) / (reloads - warmup)) : null,
    gpuMemory: 'not exposed by Dawn; on a CPU driver it is part of RSS',
    seconds: Math.round((Date.now() - started) / 100) / 10,
  };
}

if (require.main === module) {
  const reloads = Number(process.argv[2] ?? 50);
  measureReloadSafety({ reloads })
    .then((r) => {
      console.log(JSON.stringify(r, null, 1));
      process.exit(0);
    })
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
