// `npm run bench -- --sections batch-flow`: scheduled batch generation, the shape of a flow that runs one
// template over many items (issue #14): 64 items share a ~500-token instruction, each adds a ~50-token input and
// asks for 32 new tokens, all submitted at once. Run twice in one process on the same model, with shared-prefix
// reuse off (only whole prompts cached: the engine before) and on (checkpoints + in-flight de-duplication), and
// reports the prompt tokens actually computed, time to the first and last result, and the ratios.
//
// Model: RWKV_BENCH_MODEL (the 1.5B on the H200), else the bundled default model (tiny; lavapipe or the CPU here).
// --flow-items N, --flow-new-tokens N change the shape (defaults 64 and 32). --flow-max-batch N: the engine's
// maxBatch (default: one slot per item, at most 64), what an operator sets for a scheduled batch flow; with the
// engine's default of 8 the 64 items decode in eight waves and the decode steps, which reuse cannot shorten,
// dominate the wall time.

import type { EngineConfig, GenerateEvent } from '../engine/api';
import { createEngine } from '../engine/engine-factory';
import type { RwkvEngine } from '../engine/engine';
import { StepTrace, type StepTraceSummary } from '../engine/step-trace';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** About 500 tokens of instruction (World tokenizer: ~14 tokens a sentence). */
export function instructionText(): string {
  const verbs = ['read', 'check', 'summarise', 'classify', 'compare', 'translate'];
  const things = ['the customer message', 'the order details', 'the product review', 'the support ticket', 'the invoice lines', 'the delivery note'];
  let text = 'You are a careful assistant that processes one item of a batch. Follow every rule below.\n';
  for (let i = 1; i <= 28; i++) text += `Rule ${i}: ${verbs[i % verbs.length]} ${things[(i * 5) % things.length]} and answer in one short line.\n`;
  return text + 'Item:\n';
}

/** About 50 tokens of item-specific input. */
export function itemText(i: number): string {
  return `Order ${1000 + i} from customer ${(i * 7919) % 10007}: ${i % 3 === 0 ? 'the parcel arrived late and the box was damaged' : i % 3 === 1 ? 'everything arrived on time and works as described' : 'one of the three items is missing from the parcel'}, please advise what to do next with reference ${i} and keep the answer short and polite.\nAnswer:`;
}

interface FlowRun {
  prefixReuse: boolean;
  items: number;
  promptTokens: number;
  /** Prompt tokens the model computed (the rest came from the prefix cache or a retained slot). */
  prefillTokensComputed: number;
  cachedTokens: number;
  newTokens: number;
  timeToFirstResultMs: number;
  timeToLastResultMs: number;
  meanItemLatencyMs: number;
  checkpoints: number;
  sharedWaits: number;
  /** The scheduler's steps during the run: what the wall time went to. */
  steps: StepTraceSummary;
  /** Greedy output per item (compared between the runs, not printed). */
  texts?: string[];
}

async function runFlow(engine: RwkvEngine, prefixReuse: boolean, items: number, newTokens: number): Promise<FlowRun> {
  const instruction = instructionText();
  const before = { ...engine.stats };
  const t0 = performance.now();
  let promptTokens = 0;
  let cachedTokens = 0;
  let generated = 0;
  const done: number[] = [];
  const texts: string[] = new Array(items).fill('');
  const trace = new StepTrace();
  const stopTrace = engine.scheduler.onStep((step) => trace.add(step));
  await Promise.all(
    Array.from({ length: items }, async (_, i) => {
      const prompt = instruction + itemText(i);
      const events = engine.generate({ prompt, sharedPrefix: instruction.length, maxTokens: newTokens, sampler: { temperature: 0 } });
      for await (const e of events as AsyncIterable<GenerateEvent>) {
        if (e.type === 'start') (promptTokens += e.promptTokens), (cachedTokens += e.cachedTokens);
        if (e.type === 'stop') (generated += e.completionTokens), (texts[i] = e.text);
      }
      done.push(performance.now() - t0);
    }),
  );
  stopTrace();
  const s = engine.stats;
  return {
    prefixReuse,
    items,
    promptTokens,
    prefillTokensComputed: s.chunkTokens - before.chunkTokens,
    cachedTokens,
    newTokens: generated,
    timeToFirstResultMs: Math.round(Math.min(...done)),
    timeToLastResultMs: Math.round(Math.max(...done)),
    meanItemLatencyMs: Math.round(done.reduce((a, b) => a + b, 0) / done.length),
    checkpoints: s.checkpoints - before.checkpoints,
    sharedWaits: s.sharedWaits - before.sharedWaits,
    steps: trace.summary(),
    texts,
  };
}

export async function benchBatchFlow(opts: { items?: number; newTokens?: number; maxBatch?: number; config?: EngineConfig; log?: (l: string) => void } = {}) {
  const items = opts.items ?? 64;
  const newTokens = opts.newTokens ?? 32;
  const maxBatch = opts.maxBatch ?? Math.min(items, 64);
  const log = opts.log ?? (() => {});
  const modelPath = process.env.RWKV_BENCH_MODEL;
  const runs: FlowRun[] = [];
  let adapter = '';
  for (const prefixReuse of [false, true]) {
    const engine = await createEngine({ ...(modelPath ? { modelPath } : {}), maxBatch, ...opts.config, prefixReuse });
    adapter = engine.modelInfo.adapter;
    try {
      // Warm-up (pipelines, first-call allocations) on an unrelated prompt, so both runs start alike.
      for await (const _ of engine.generate({ prompt: 'Warm up.', maxTokens: 2 })) void _;
      const r = await runFlow(engine, prefixReuse, items, newTokens);
      log(`prefixReuse ${prefixReuse}: ${r.prefillTokensComputed}/${r.promptTokens} prompt tokens computed, last result ${r.timeToLastResultMs} ms, first ${r.timeToFirstResultMs} ms`);
      const b = r.steps.backendMs;
      log(`  ${r.steps.steps} steps (${r.steps.prefillOnlySteps} prefill only, ${r.steps.mixedSteps} chunks + decoding, ${r.steps.decodeOnlySteps} decode only); backend ${b.prefillOnly} / ${b.mixed} / ${b.decodeOnly} ms, between steps ${r.steps.betweenStepsMs} ms:`);
      for (const l of r.steps.timeline) log(`    ${l}`);
      runs.push(r);
    } finally {
      await engine.close();
    }
  }
  const [off, on] = runs;
  if (!off || !on) throw new Error('batch-flow: a run is missing');
  // Greedy decoding: reuse should not change outputs (resuming from a checkpoint changes only where chunks split,
  // which can move a float rounding; a differing item or two on a long run is that, many would be a bug).
  const identicalOutputs = off.texts!.filter((t, i) => t === on.texts![i]).length;
  delete off.texts;
  delete on.texts;
  return {
    model: modelPath ?? 'bundled default model',
    adapter,
    maxBatch,
    instructionChars: instructionText().length,
    // What the cache gave each item after the first: the instruction's tokens.
    sharedTokensPerItem: Math.round(on.cachedTokens / Math.max(1, items - 1)),
    promptTokensPerItem: Math.round(on.promptTokens / items),
    off,
    on,
    identicalOutputs: `${identicalOutputs}/${items}`,
    prefillWorkRatio: +(off.prefillTokensComputed / Math.max(1, on.prefillTokensComputed)).toFixed(2),
    timeToLastResultRatio: +(off.timeToLastResultMs / Math.max(1, on.timeToLastResultMs)).toFixed(2),
  };
}

function flowOptions() {
  const maxBatch = arg('flow-max-batch');
  return {
    items: Number(arg('flow-items') ?? 64),
    newTokens: Number(arg('flow-new-tokens') ?? 32),
    ...(maxBatch ? { maxBatch: Number(maxBatch) } : {}),
    log: (l: string) => console.log(l),
  };
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('batch-flow', () =>
    benchBatchFlow(flowOptions()),
  );
}

if (require.main === module) {
  benchBatchFlow(flowOptions())
    .then((r) => (console.log(JSON.stringify(r, null, 1)), process.exit(0)))
    .catch((e) => (console.error(e), process.exit(1)));
}
