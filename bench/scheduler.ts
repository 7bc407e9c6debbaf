// Scheduler benchmark: aggregate decode throughput against concurrency, time to first token of a
// repeated long prompt (cold vs prefix cache), and decode speed of running requests while a long
// prompt is prefilled. Drives the Scheduler directly with real samplers (no tokenizer), so it
// measures the runtime: batching, prefill interleaving, cache and CPU sampling per step.
//
//   benchScheduler(factory)  — the lead runs it on the H200 (see defaults below)
//   node dist/bench/scheduler.js  — smoke run here on lavapipe with a tiny random model

import type { InferenceBackend, JobResult, SlotJob, TopLogits } from '../engine/types';
import { InitialStateRegistry, type InitialState } from '../engine/initial-states';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import { Scheduler } from '../engine/scheduler';
import { ENGINE_DEFAULTS } from '../engine/engine';
import type { Feed, SlotTask } from '../engine/slot-task';

export type BackendFactory = (slots: number) => Promise<InferenceBackend>;

export interface SchedulerBenchOptions {
  /** Concurrent requests to measure decode throughput at. */
  concurrency?: number[];
  /** Tokens each request decodes in the throughput runs. */
  decodeTokens?: number;
  /** Concurrencies also measured sampling full logits rows on the CPU (no 'top' output), for the ratio. */
  fullRowConcurrency?: number[];
  /** Length of the repeated prompt (time to first token). */
  cachedPromptTokens?: number;
  /** Length of the prompt prefilled while 8 requests decode. */
  interferencePromptTokens?: number;
  /** Requests decoding during the interference test. */
  interferenceRequests?: number;
  /** Prefill chunk while others decode, and while none does (the engine's defaults). */
  chunkSize?: number;
  prefillChunkSize?: number;
  /** Further chunk sizes the interference test is repeated with. */
  extraChunkSizes?: number[];
  cacheBytes?: number;
  log?: (line: string) => void;
}

const DEFAULTS: Required<Omit<SchedulerBenchOptions, 'log'>> = {
  concurrency: [1, 8, 32, 64],
  decodeTokens: 128,
  fullRowConcurrency: [8, 64],
  cachedPromptTokens: 2000,
  interferencePromptTokens: 4000,
  interferenceRequests: 8,
  chunkSize: ENGINE_DEFAULTS.chunkSize,
  prefillChunkSize: ENGINE_DEFAULTS.prefillChunkSize,
  extraChunkSizes: [128, 512],
  cacheBytes: 4 * 1024 ** 3,
};

/** Decodes with the default ai00 nucleus sampler, from the GPU's 'top' output as generate() does unless told not to; records when each token came. */
class BenchTask implements SlotTask {
  readonly cachePrompt = 'auto' as const;
  readonly tokenTimes: number[] = [];
  firstTokenAt = 0;
  cachedTokens = -1;
  readonly done: Promise<void>;
  private finish!: () => void;
  private fail!: (e: Error) => void;
  private stopped = false;

  constructor(
    readonly initial: InitialState,
    readonly prompt: number[],
    private readonly maxTokens: number,
    private readonly sampler: TokenSampler,
    private readonly useTop: boolean,
  ) {
    this.done = new Promise((res, rej) => ((this.finish = res), (this.fail = rej)));
  }

  /** Ask a long-running request to end at its next step. */
  stop(): void {
    this.stopped = true;
  }

  onStart(info: { cachedTokens: number }): void {
    this.cachedTokens = info.cachedTokens;
  }

  onPrefilled(logits: Float32Array): Feed | null {
    this.firstTokenAt = performance.now();
    return this.next(logits);
  }

  onFed(result: JobResult): Feed | null {
    return this.next(result!);
  }

  onAbort(): void {
    this.fail(new Error('aborted'));
  }

  onError(e: Error): void {
    this.fail(e);
  }

  private next(logits: Float32Array | TopLogits): Feed | null {
    const row = logits instanceof Float32Array ? this.sampler.sample(logits) : this.sampler.sampleTop(logits);
    this.tokenTimes.push(performance.now());
    if (this.stopped || this.tokenTimes.length >= this.maxTokens) {
      this.finish();
      return null;
    }
    return this.useTop ? { tokens: [row], output: 'top', adjust: this.sampler.adjustments() } : { tokens: [row], output: 'last' };
  }
}

function randomPrompt(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0 || 1;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return 1 + (s % (vocab - 1));
  });
}

const round = (x: number, digits = 3) => Number(x.toFixed(digits));

export async function benchScheduler(backendFactory: BackendFactory, options: SchedulerBenchOptions = {}): Promise<Record<string, number>> {
  const o = { ...DEFAULTS, ...options };
  const log = options.log ?? (() => {});
  const slots = Math.max(...o.concurrency, o.interferenceRequests + 1);
  const backend = await backendFactory(slots);
  // Every backend call's start, duration and prompt tokens, to see where a window's time went.
  const calls: { at: number; ms: number; chunk: number }[] = [];
  const run = backend.run.bind(backend) as (jobs: SlotJob[]) => Promise<JobResult[]>;
  backend.run = (async (jobs: SlotJob[]) => {
    const at = performance.now();
    try {
      return await run(jobs);
    } finally {
      calls.push({ at, ms: performance.now() - at, chunk: jobs.reduce((n, j) => n + (j.tokens.length > 1 ? j.tokens.length : 0), 0) });
    }
  }) as typeof backend.run;
  const window = (from: number, to: number) => {
    const inside = calls.filter((c) => c.at >= from && c.at + c.ms <= to);
    const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
    const chunkSteps = inside.filter((c) => c.chunk > 0);
    const decodeSteps = inside.filter((c) => c.chunk === 0);
    return {
      chunkSteps: chunkSteps.length,
      decodeSteps: decodeSteps.length,
      chunkStepMs: mean(chunkSteps.map((c) => c.ms)),
      decodeStepMs: mean(decodeSteps.map((c) => c.ms)),
      hostShare: 1 - inside.reduce((n, c) => n + c.ms, 0) / (to - from),
      // Host time from one call's end to the next call's start.
      gapMs: mean(inside.slice(1).map((c, i) => c.at - (inside[i].at + inside[i].ms))),
      // Decode-only steps right after a chunk step against later ones: do chunks slow their neighbours?
      decodeAfterChunkMs: mean(inside.filter((c, i) => c.chunk === 0 && i > 0 && inside[i - 1].chunk > 0).map((c) => c.ms)),
      decodeLaterMs: mean(inside.filter((c, i) => c.chunk === 0 && i > 1 && inside[i - 1].chunk === 0 && inside[i - 2].chunk === 0).map((c) => c.ms)),
    };
  };
  const vocab = backend.info.vocabSize;
  const rows = vocab;
  const states = new InitialStateRegistry(backend.stateSize, o.cacheBytes);
  const scheduler = new Scheduler(backend, { chunkSize: o.chunkSize, prefillChunkSize: o.prefillChunkSize, maxQueue: 1024, cacheMinTokens: 256 });
  const sampler = (seed: number) =>
    new TokenSampler(resolveSamplerOptions({ seed, logitBias: { 0: -Infinity } }), rows, (id) => (id < rows ? id : -1));
  const topCapacity = backend.topCapacity ?? 0;
  const task = (prompt: number[], maxTokens: number, seed: number, full = false) => {
    const s = sampler(seed);
    return new BenchTask(states.zero, prompt, maxTokens, s, !full && s.canSampleTop(topCapacity));
  };
  const results: Record<string, number> = {};
  let seed = 1;
  try {
    // Warm-up: compile pipelines, fill allocators.
    const warm = task(randomPrompt(32, vocab, seed++), 4, 0);
    scheduler.submit(warm);
    await warm.done;

    // 1. Aggregate decode throughput against concurrency.
    const decodeRun = async (c: number, full: boolean) => {
      const tasks = Array.from({ length: c }, (_, i) => task(randomPrompt(16, vocab, seed++), o.decodeTokens, i, full));
      const before = { ...scheduler.stats, at: performance.now() };
      tasks.forEach((t) => scheduler.submit(t));
      await Promise.all(tasks.map((t) => t.done));
      // Count from the moment every request was decoding, so short prefills don't dilute it.
      const from = Math.max(...tasks.map((t) => t.firstTokenAt));
      const to = Math.max(...tasks.map((t) => t.tokenTimes[t.tokenTimes.length - 1]));
      const tokens = tasks.reduce((n, t) => n + t.tokenTimes.filter((x) => x > from).length, 0);
      const wall = performance.now() - before.at;
      return {
        tps: round(tokens / ((to - from) / 1000), 1),
        stepMs: round(wall / (scheduler.stats.steps - before.steps), 2),
        // Share of the wall time spent waiting on backend.run (GPU + read-back); the rest is CPU sampling and bookkeeping.
        backendShare: round((scheduler.stats.backendMs - before.backendMs) / wall, 3),
      };
    };
    for (const c of o.concurrency) {
      const r = await decodeRun(c, false);
      results[`decode_tps_c${c}`] = r.tps;
      results[`step_ms_c${c}`] = r.stepMs;
      results[`backend_share_c${c}`] = r.backendShare;
      log(`decode c=${c}: ${r.tps} tok/s, ${r.stepMs} ms/step, backend ${r.backendShare} of it`);
    }
    if (topCapacity > 0) {
      for (const c of o.fullRowConcurrency) {
        const r = await decodeRun(c, true);
        results[`decode_tps_c${c}_fullrows`] = r.tps;
        results[`step_ms_c${c}_fullrows`] = r.stepMs;
        results[`backend_share_c${c}_fullrows`] = r.backendShare;
        results[`top_over_fullrows_c${c}`] = results[`decode_tps_c${c}`] ? round(results[`decode_tps_c${c}`] / r.tps, 2) : 0;
        log(`decode c=${c}, full rows sampled on the CPU: ${r.tps} tok/s, ${r.stepMs} ms/step, backend ${r.backendShare} of it`);
      }
    }
    const base = results[`decode_tps_c${o.concurrency[0]}`];
    for (const c of o.concurrency) results[`decode_tps_c${c}_ratio`] = round(results[`decode_tps_c${c}`] / base, 2);

    // 2. Time to first token of a repeated long prompt: cold, then from the prefix cache
    //    (after other requests took every slot, so the slot's own retained state is gone).
    const long = randomPrompt(o.cachedPromptTokens, vocab, seed++);
    const ttft = async () => {
      const t = task(long, 1, 0);
      const start = performance.now();
      scheduler.submit(t);
      await t.done;
      return { ms: t.firstTokenAt - start, cached: t.cachedTokens };
    };
    const cold = await ttft();
    const cachedRuns: number[] = [];
    for (let rep = 0; rep < 5; rep++) {
      const evict = Array.from({ length: slots }, (_, i) => task(randomPrompt(8, vocab, seed++), 1, i));
      evict.forEach((t) => scheduler.submit(t));
      await Promise.all(evict.map((t) => t.done));
      const r = await ttft();
      if (r.cached !== long.length) throw new Error(`repeated prompt was not served from the cache (${r.cached} of ${long.length} tokens)`);
      cachedRuns.push(r.ms);
    }
    // Median of five: a single first token is one sampling step, easily hit by a garbage collection.
    const cached = { ms: cachedRuns.sort((a, b) => a - b)[2] };
    results.ttft_cold_ms = round(cold.ms, 1);
    results.ttft_cached_ms = round(cached.ms, 2);
    results.ttft_cold_over_cached = round(cold.ms / cached.ms, 1);
    log(`ttft ${o.cachedPromptTokens} tokens: cold ${results.ttft_cold_ms} ms, cached ${results.ttft_cached_ms} ms`);

    // 3. Decode speed of running requests while a long prompt is prefilled, against without; then the same
    //    with larger chunks (a fresh scheduler each), to see which chunk size prefills fastest at that share.
    const interference = async (sched: Scheduler, chunk: number) => {
      const runners = Array.from({ length: o.interferenceRequests }, (_, i) => task(randomPrompt(16, vocab, seed++), 1e9, i));
      runners.forEach((t) => sched.submit(t));
      const count = (from: number, to: number) => runners.reduce((n, t) => n + t.tokenTimes.filter((x) => x > from && x <= to).length, 0);
      await new Promise((r) => setTimeout(r, 50));
      while (Math.min(...runners.map((t) => t.tokenTimes.length)) < 4) await new Promise((r) => setTimeout(r, 10));
      const quietSteps = Math.max(32, Math.ceil(o.interferencePromptTokens / chunk));
      /** Decode rate over the next quietSteps steps with no prompt, and where those steps' time went. */
      const undisturbed = async () => {
        const from = performance.now();
        const target = runners[0].tokenTimes.length + quietSteps;
        while (runners[0].tokenTimes.length < target) await new Promise((r) => setTimeout(r, 5));
        const to = performance.now();
        return { rate: count(from, to) / ((to - from) / 1000), window: window(from, to) };
      };
      const quiet = await undisturbed();
      const prefill = task(randomPrompt(o.interferencePromptTokens, vocab, seed++), 1, 0);
      const busyFrom = performance.now();
      sched.submit(prefill);
      await prefill.done;
      const busyTo = prefill.firstTokenAt;
      const busyRate = count(busyFrom, busyTo) / ((busyTo - busyFrom) / 1000);
      // The same window length again after the prompt: the runners are older now (longer penalty lists, warmer
      // allocators), so a drop that persists here is not the prefill's doing.
      const after = await undisturbed();
      runners.forEach((t) => t.stop());
      await Promise.all(runners.map((t) => t.done));
      const pacing = sched.pacing;
      return {
        quietRate: quiet.rate, busyRate, afterRate: after.rate, prefillMs: busyTo - busyFrom, pacing,
        quiet: quiet.window, busy: window(busyFrom, busyTo), after: after.window,
      };
    };
    const r = await interference(scheduler, o.chunkSize);
    results.decode_tps_8_alone = round(r.quietRate, 1);
    results.decode_tps_8_during_prefill = round(r.busyRate, 1);
    results.decode_during_prefill_ratio = round(r.busyRate / r.quietRate, 3);
    results.decode_tps_8_after = round(r.afterRate, 1);
    results.decode_during_prefill_ratio_vs_after = round(r.busyRate / r.afterRate, 3);
    results.prefill_ms_during_decode = round(r.prefillMs, 1);
    results.pacer_reference_step_ms = round(r.pacing.referenceMs, 2);
    results.pacer_chunk_step_ms = round(r.pacing.chunkStepMs, 2);
    results.pacer_steps_per_chunk = round(r.pacing.steps / Math.max(1, r.pacing.chunks), 1);
    for (const [name, w] of [['quiet', r.quiet], ['busy', r.busy], ['after', r.after]] as const) {
      results[`${name}_chunk_steps`] = w.chunkSteps;
      results[`${name}_decode_steps`] = w.decodeSteps;
      results[`${name}_chunk_step_ms`] = round(w.chunkStepMs, 2);
      results[`${name}_decode_step_ms`] = round(w.decodeStepMs, 2);
      results[`${name}_host_share`] = round(w.hostShare, 3);
      results[`${name}_gap_ms`] = round(w.gapMs, 2);
      results[`${name}_decode_after_chunk_ms`] = round(w.decodeAfterChunkMs, 2);
      results[`${name}_decode_later_ms`] = round(w.decodeLaterMs, 2);
    }
    log(`decode of ${o.interferenceRequests} running: ${results.decode_tps_8_alone} tok/s alone, ${results.decode_tps_8_during_prefill} during a ${o.interferencePromptTokens}-token prefill (ratio ${results.decode_during_prefill_ratio}, prompt in ${results.prefill_ms_during_decode} ms); ${results.decode_tps_8_after} tok/s after it (ratio to that ${results.decode_during_prefill_ratio_vs_after})`);
    for (const chunk of o.extraChunkSizes) {
      const sched = new Scheduler(backend, { chunkSize: chunk, maxQueue: 1024, cacheMinTokens: 1e9 });
      try {
        const x = await interference(sched, chunk);
        results[`decode_during_prefill_ratio_chunk${chunk}`] = round(x.busyRate / x.quietRate, 3);
        results[`prefill_ms_during_decode_chunk${chunk}`] = round(x.prefillMs, 1);
        results[`pacer_steps_per_chunk_chunk${chunk}`] = round(x.pacing.steps / Math.max(1, x.pacing.chunks), 1);
        log(`  with ${chunk}-token chunks: ratio ${results[`decode_during_prefill_ratio_chunk${chunk}`]}, prompt in ${results[`prefill_ms_during_decode_chunk${chunk}`]} ms, a chunk every ${results[`pacer_steps_per_chunk_chunk${chunk}`]} steps`);
      } finally {
        await sched.close();
      }
    }
  } finally {
    await scheduler.close();
    backend.dispose();
  }
  return results;
}

/** Model for a run: a real file when RWKV_BENCH_MODEL is set, else a random RWKV-7 (1.5B shape on a GPU, tiny on a CPU driver). */
export async function benchFactory(onGpu: boolean, gpu?: unknown): Promise<{ factory: BackendFactory; label: string }> {
  const { createBackend } = await import('../engine/backend.js');
  const file = process.env.RWKV_BENCH_MODEL;
  if (file) return { factory: (slots) => createBackend({ model: file, slots, gpu: gpu as never }), label: file };
  const { randomRwkv7Checkpoint } = await import('../engine/random-model.js');
  const shape = onGpu ? { nLayer: 24, nEmbd: 2048, vocabSize: 65536 } : { nLayer: 2, nEmbd: 128, vocabSize: 1024 };
  const model = randomRwkv7Checkpoint({ ...shape, seed: 3, dtype: onGpu ? 'f16' : 'f32' });
  return {
    factory: (slots) => createBackend({ model, slots, precision: onGpu ? 'f16' : 'f32', gpu: gpu as never, maxTokens: 1024 }),
    label: `random RWKV-7 L${shape.nLayer} C${shape.nEmbd} V${shape.vocabSize}`,
  };
}

const SMOKE: SchedulerBenchOptions = {
  concurrency: [1, 4, 8],
  decodeTokens: 16,
  fullRowConcurrency: [8],
  cachedPromptTokens: 300,
  interferencePromptTokens: 400,
  interferenceRequests: 8,
  chunkSize: 64,
  extraChunkSizes: [128],
};

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: (ctx: { gpu: unknown; onGpu: boolean }) => Promise<Record<string, unknown>>) => void): void {
  register('scheduler', async ({ gpu, onGpu }) => {
    const { factory, label } = await benchFactory(onGpu, gpu);
    const results = await benchScheduler(factory, onGpu ? { log: (l) => console.log(l) } : { ...SMOKE, log: (l) => console.log(l) });
    return { model: label, ...results };
  });
}

/** Smoke run on whatever WebGPU adapter is here (lavapipe) with a tiny random RWKV-7; --full for the H200 settings. */
async function main(): Promise<void> {
  const full = process.argv.includes('--full');
  const { factory, label } = await benchFactory(full);
  console.log(`model: ${label}`);
  const results = await benchScheduler(factory, full ? { log: (l) => console.log(l) } : { ...SMOKE, log: (l) => console.log(l) });
  console.log(JSON.stringify(results, null, 2));
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
