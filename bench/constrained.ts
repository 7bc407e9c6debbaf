// Constrained decoding through the engine: JSON-schema requests decoding together, with the grammar's mask
// applied on the GPU before the 'top' reduction, against sampling full rows masked on the CPU (the path
// typical and mirostat requests still take). Real tokenizer and grammar module; random model.
//
//   node dist/bench/run.js --sections constrained

import type { GenerateEvent } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { tokenizerFor } from '../engine/engine-factory';
import { MID_SIZE_SCHEMA } from './grammar';
import { benchFactory, type BackendFactory } from './scheduler';

export interface ConstrainedBenchOptions {
  concurrency?: number[];
  /** Tokens each request may decode. */
  maxTokens?: number;
  log?: (line: string) => void;
}

const round = (x: number, digits = 1) => Number(x.toFixed(digits));

/** Aggregate constrained decode tok/s at each concurrency, GPU mask against CPU mask, and their ratio. */
export async function benchConstrained(factory: BackendFactory, options: ConstrainedBenchOptions = {}): Promise<Record<string, number>> {
  const concurrency = options.concurrency ?? [8, 32];
  const maxTokens = options.maxTokens ?? 96;
  const log = options.log ?? (() => {});
  const results: Record<string, number> = {};
  for (const where of ['gpu', 'cpu'] as const) {
    const backend = await factory(Math.max(...concurrency));
    // Without the 'top' output the engine samples every full row on the CPU, masking it there.
    if (where === 'cpu') Object.defineProperty(backend, 'topCapacity', { value: 0 });
    const engine = new RwkvEngine({ backend, tokenizer: tokenizerFor(backend.info), config: {}, cacheMinTokens: 1e9 });
    try {
      const request = async (seed: number, tokens: number, times: number[]) => {
        try {
          for await (const ev of engine.generate({ prompt: `Order ${seed}:`, maxTokens: tokens, jsonSchema: MID_SIZE_SCHEMA, sampler: { seed } })) {
            if ((ev as GenerateEvent).type === 'delta') for (const _ of (ev as { tokens: number[] }).tokens) times.push(performance.now());
          }
        } catch (e) {
          // The schema's shortest document is longer than the budget: the output is refused at the end, as it
          // should be; the decode steps before that are what is measured.
          if (!/constrained output rejected/.test((e as Error).message)) throw e;
        }
      };
      await request(0, 8, []); // warm-up: pipelines, and the schema compiled once (the engine caches it)
      for (const c of concurrency) {
        const times = Array.from({ length: c }, () => [] as number[]);
        await Promise.all(times.map((t, i) => request(i + 1, maxTokens, t)));
        // Count from the moment every request was decoding, so prefill and admission don't dilute it.
        const from = Math.max(...times.map((t) => t[0] ?? Infinity));
        const to = Math.max(...times.map((t) => t[t.length - 1] ?? 0));
        const tokens = times.reduce((n, t) => n + t.filter((x) => x > from).length, 0);
        const tps = to > from ? tokens / ((to - from) / 1000) : 0;
        results[`constrained_tps_c${c}_${where}_mask`] = round(tps);
        log(`constrained decode c=${c}, mask on the ${where.toUpperCase()}: ${round(tps)} tok/s`);
      }
    } finally {
      await engine.close();
      backend.dispose();
    }
  }
  for (const c of concurrency) {
    const cpu = results[`constrained_tps_c${c}_cpu_mask`];
    results[`constrained_gpu_over_cpu_c${c}`] = cpu ? round(results[`constrained_tps_c${c}_gpu_mask`] / cpu, 2) : 0;
  }
  return results;
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: (ctx: { gpu: unknown; onGpu: boolean }) => Promise<Record<string, unknown>>) => void): void {
  register('constrained', async ({ gpu, onGpu }) => {
    const { factory, label } = await benchFactory(onGpu, gpu);
    const results = await benchConstrained(factory, onGpu ? { log: (l) => console.log(l) } : { concurrency: [4, 8], maxTokens: 24, log: (l) => console.log(l) });
    return { model: label, ...results };
  });
}
