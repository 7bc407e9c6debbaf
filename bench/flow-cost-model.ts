// `npm run bench -- --sections batch-flow-model` (or node dist/bench/flow-cost-model.js): the batch-flow run
// (bench/batch-flow.ts) with the real engine and scheduler over a backend that computes nothing and charges each
// GPU call the time the H200 took for it (1.5B f16), on a virtual clock. It says what wall time a scheduling
// policy gives on the H200 without one, and how the steps are laid out; the H200 run is still the measurement.
//
// The clock: performance.now() is replaced for the run, and advances only by the modelled GPU time (plus a fixed
// host time a step), so the pacer sees the H200's step periods. GPU calls are served in order on one queue, as
// WebGPU does: a state read-back queued between two steps delays the second, and is seen finished when the next
// step is (or at once when nothing else is running).

import type { GenerateEvent } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { StepTrace, type StepTraceSummary } from '../engine/step-trace';
import { WorldTokenizer } from '../engine/tokenizer';
import type { InferenceBackend, ModelInfo, SlotJob } from '../engine/types';
import { instructionText, itemText } from './batch-flow';

/** Step cost of a call carrying `tokens` token rows in all (decode rows and chunk tokens alike), from measured points. */
export interface GpuCostModel {
  /** [tokens in the call, ms] ascending; linear between points, extrapolated from the last two. */
  stepMs: [number, number][];
  /** Most tokens one GPU pass takes (the engine's maxTokens: prefillChunkSize + maxBatch); larger calls run several. */
  passTokens: number;
  /** Added per job of more than one token (each prompt's recurrence runs on its own). */
  perChunkJobMs: number;
  /** Added per token of such jobs (prefill of many slots at once slower than of one). */
  perChunkTokenMs: number;
  readStateMs: number;
  writeStateMs: number;
  /** A slot-to-slot state copy on the GPU (two 13 MB copies at HBM speed, one submit). */
  copyStateMs: number;
  /** Host work a step (planning, sampling, submitting). */
  hostMs: number;
}

/**
 * H200, 1.5B f16 (bench/RESULTS.md, "Engine" after the WKV change): decode b1 224 tok/s, b8 902, b32 1342,
 * b64 2195; prefill of one 128-token chunk 4322 tok/s, of one 512-token chunk 7496 tok/s. State read-back and
 * upload (13 MB) at PCIe speed with a map's round trip. perChunkJobMs is fitted so that the modelled run with
 * reuse off, all prefill with 64 jobs a call, takes what the H200 took (7,145 ms).
 */
export const H200_15B: GpuCostModel = {
  stepMs: [
    [1, 4.46],
    [8, 8.87],
    [32, 23.8],
    [64, 29.2],
    [128, 29.6],
    [512, 68.3],
  ],
  passTokens: 512 + 64,
  perChunkJobMs: 0,
  perChunkTokenMs: 0,
  readStateMs: 1.5,
  writeStateMs: 0.7,
  copyStateMs: 0.05,
  hostMs: 0.5,
};

function interpolate(points: [number, number][], x: number): number {
  let i = 1;
  while (i < points.length - 1 && points[i][0] < x) i++;
  const [x0, y0] = points[i - 1];
  const [x1, y1] = points[i];
  return Math.max(y0 * 0.5, y0 + ((y1 - y0) * (x - x0)) / (x1 - x0));
}

/** Milliseconds on a virtual clock, which the cost-model backend advances. */
class VirtualClock {
  now = 0;
  private readonly original = performance.now.bind(performance);

  install(): void {
    Object.defineProperty(performance, 'now', { value: () => this.now, configurable: true, writable: true });
  }

  uninstall(): void {
    Object.defineProperty(performance, 'now', { value: this.original, configurable: true, writable: true });
  }
}

interface QueuedOp {
  end: number;
  resolve: () => void;
}

/**
 * A backend of the model's shape that only keeps time. Every job asking for logits gets a row favouring one
 * ordinary token, so greedy generations run to their token limit.
 */
class CostModelBackend implements InferenceBackend {
  readonly info: ModelInfo;
  readonly stateSize: number;
  private gpuFreeAt = 0;
  private readonly ops: QueuedOp[] = [];
  readonly calls: { tokens: number; jobs: number; ms: number }[] = [];

  constructor(
    readonly slots: number,
    private readonly clock: VirtualClock,
    private readonly cost: GpuCostModel,
  ) {
    // RWKV-7 1.5B: 24 layers of 2048, 32 heads of 64, World vocabulary.
    this.info = { version: 'v7', nLayer: 24, nEmbd: 2048, nHead: 32, headSize: 64, vocabSize: 65536, ffnDim: 8192, loraDims: { w: 96, a: 96, v: 64, g: 256 } };
    this.stateSize = 24 * (2 * 2048 + 32 * 64 * 64);
  }

  /** Queue `ms` of GPU work; resolves when it is done on the virtual clock (see settle). */
  private enqueue(ms: number, settleNow: boolean): Promise<void> {
    const start = Math.max(this.clock.now, this.gpuFreeAt);
    this.gpuFreeAt = start + ms;
    return new Promise((resolve) => {
      const op = { end: this.gpuFreeAt, resolve };
      this.ops.push(op);
      const settle = () => this.settleThrough(this.ops.indexOf(op) + 1);
      if (settleNow) setImmediate(settle);
      // A read is seen finished with the next step (the host plans that step before the read's callback comes);
      // one that no step follows (the loop idle, or awaiting it) is finished after a while of real time.
      else setTimeout(settle, 50);
    });
  }

  /** Finish the first n queued operations in order, the clock moving to each one's end. */
  private settleThrough(n: number): void {
    for (const op of this.ops.splice(0, n)) {
      this.clock.now = Math.max(this.clock.now, op.end);
      op.resolve();
    }
  }

  async run(jobs: SlotJob[]): Promise<(Float32Array | null)[]> {
    const tokens = jobs.reduce((n, j) => n + j.tokens.length, 0);
    const chunkJobs = jobs.filter((j) => j.tokens.length > 1).length;
    const chunkTokens = jobs.reduce((n, j) => n + (j.tokens.length > 1 ? j.tokens.length : 0), 0);
    const passes = Math.ceil(tokens / this.cost.passTokens);
    const last = tokens - (passes - 1) * this.cost.passTokens;
    const ms = (passes - 1) * interpolate(this.cost.stepMs, this.cost.passTokens) + interpolate(this.cost.stepMs, last) + chunkJobs * this.cost.perChunkJobMs + chunkTokens * this.cost.perChunkTokenMs;
    this.calls.push({ tokens, jobs: jobs.length, ms });
    this.clock.now += this.cost.hostMs;
    await this.enqueue(ms, true);
    const V = this.info.vocabSize;
    return jobs.map((j) => {
      if (j.output === 'none') return null;
      const rows = j.output === 'all' ? j.tokens.length : 1;
      const out = new Float32Array(rows * V);
      for (let r = 0; r < rows; r++) out[r * V + 300] = 10;
      return out;
    });
  }

  async readState(): Promise<Float32Array> {
    await this.enqueue(this.cost.readStateMs, false);
    return new Float32Array(this.stateSize);
  }

  writeState(): void {
    this.gpuFreeAt = Math.max(this.clock.now, this.gpuFreeAt) + this.cost.writeStateMs;
  }

  resetState(): void {}

  copyState(): void {
    this.gpuFreeAt = Math.max(this.clock.now, this.gpuFreeAt) + this.cost.copyStateMs;
  }

  dispose(): void {}
}

export interface ModelledFlowRun {
  prefixReuse: boolean;
  prefillTokensComputed: number;
  timeToFirstResultMs: number;
  timeToLastResultMs: number;
  meanItemLatencyMs: number;
  steps: StepTraceSummary;
}

async function modelledRun(prefixReuse: boolean, items: number, newTokens: number, cost: GpuCostModel, slots: number): Promise<ModelledFlowRun> {
  const clock = new VirtualClock();
  clock.install();
  const backend = new CostModelBackend(slots, clock, cost);
  const engine = new RwkvEngine({ backend, tokenizer: WorldTokenizer.bundled(), config: { prefixReuse }, compileConstraint: null });
  try {
    for await (const _ of engine.generate({ prompt: 'Warm up.', maxTokens: 2 })) void _;
    const trace = new StepTrace();
    const stop = engine.scheduler.onStep((s) => trace.add(s));
    const before = engine.stats.chunkTokens;
    const t0 = clock.now;
    const instruction = instructionText();
    const done: number[] = [];
    await Promise.all(
      Array.from({ length: items }, async (_, i) => {
        const events = engine.generate({ prompt: instruction + itemText(i), sharedPrefix: instruction.length, maxTokens: newTokens, sampler: { temperature: 0 } });
        for await (const e of events as AsyncIterable<GenerateEvent>) void e;
        done.push(clock.now - t0);
      }),
    );
    stop();
    return {
      prefixReuse,
      prefillTokensComputed: engine.stats.chunkTokens - before,
      timeToFirstResultMs: Math.round(Math.min(...done)),
      timeToLastResultMs: Math.round(Math.max(...done)),
      meanItemLatencyMs: Math.round(done.reduce((a, b) => a + b, 0) / done.length),
      steps: trace.summary(),
    };
  } finally {
    await engine.close();
    clock.uninstall();
  }
}

export async function benchFlowCostModel(opts: { items?: number; newTokens?: number; cost?: GpuCostModel; log?: (l: string) => void } = {}) {
  const items = opts.items ?? 64;
  const newTokens = opts.newTokens ?? 32;
  const cost = opts.cost ?? H200_15B;
  const log = opts.log ?? (() => {});
  const runs: ModelledFlowRun[] = [];
  for (const reuse of [false, true]) {
    const r = await modelledRun(reuse, items, newTokens, cost, Math.min(items, 64));
    log(`modelled H200, prefixReuse ${reuse}: ${r.prefillTokensComputed} prompt tokens computed, last result ${r.timeToLastResultMs} ms, first ${r.timeToFirstResultMs} ms, mean ${r.meanItemLatencyMs} ms`);
    const b = r.steps.backendMs;
    log(`  ${r.steps.steps} steps (${r.steps.prefillOnlySteps} prefill only, ${r.steps.mixedSteps} chunks + decoding, ${r.steps.decodeOnlySteps} decode only); backend ${b.prefillOnly} / ${b.mixed} / ${b.decodeOnly} ms, between steps ${r.steps.betweenStepsMs} ms:`);
    for (const l of r.steps.timeline) log(`    ${l}`);
    runs.push(r);
  }
  const [off, on] = runs;
  return { cost, off, on, timeToLastResultRatio: +(off.timeToLastResultMs / Math.max(1, on.timeToLastResultMs)).toFixed(2) };
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('batch-flow-model', () => benchFlowCostModel({ log: (l) => console.log(l) }));
}

if (require.main === module) {
  // Other hypotheses for what the H200's run with reuse off spent beyond this model (see RESULTS / the report).
  const num = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? Number(process.argv[i + 1]) : undefined;
  };
  const cost = { ...H200_15B };
  for (const [flag, key] of [['per-chunk-job-ms', 'perChunkJobMs'], ['per-chunk-token-ms', 'perChunkTokenMs'], ['read-state-ms', 'readStateMs'], ['write-state-ms', 'writeStateMs'], ['host-ms', 'hostMs']] as const) {
    const v = num(flag);
    if (v !== undefined) {
      if (!(v >= 0)) throw new RangeError(`--${flag} must be a number >= 0`);
      cost[key] = v;
    }
  }
  benchFlowCostModel({ cost, log: (l) => console.log(l) })
    .then((r) => (console.log(JSON.stringify({ ...r, off: { ...r.off, steps: undefined }, on: { ...r.on, steps: undefined } }, null, 1)), process.exit(0)))
    .catch((e) => (console.error(e), process.exit(1)));
}
