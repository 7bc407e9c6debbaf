// A stand-in for the scheduler's constrained decoding loop, driven by seeded random logits:
// mask -> softmax sampling over allowed tokens -> accept, with forced tokens taken without
// sampling and the shortest completion emitted when the token budget runs out. Used by the
// random-generation test and the grammar benchmark.

import type { CompiledConstraint } from '../engine/grammar';

export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SampleRun {
  tokens: number[];
  /** Steps whose token came from forcedToken() (no sampling). */
  forcedSteps: number;
  /** True when the budget ran out and the shortest completion closed the output. */
  completed: boolean;
  /** fillMask time per sampled step, microseconds. */
  maskMicros: number[];
}

export interface SampleOptions {
  seed: number;
  maxTokens: number;
  /** Spread of the random logits (uniform in [0, scale)); higher = peakier. */
  logitScale?: number;
  /** Extra logit for the end of text, so random runs sometimes stop early. */
  eosBias?: number;
}

export function sampleConstrained(constraint: CompiledConstraint, vocabSize: number, opts: SampleOptions): SampleRun {
  const rand = mulberry32(opts.seed);
  const m = constraint.newMatcher();
  const mask = new Uint32Array((vocabSize + 31) >>> 5);
  const run: SampleRun = { tokens: [], forcedSteps: 0, completed: false, maskMicros: [] };
  const scale = opts.logitScale ?? 2;
  while (!m.isDone()) {
    // Close the output with its shortest completion once that would only just fit the budget.
    const left = opts.maxTokens - run.tokens.length;
    const completion = m.completionTokens()!;
    if (completion.length + 2 >= left) {
      for (const t of completion) m.accept(t);
      run.tokens.push(...completion);
      run.completed = completion.length > 0;
      break;
    }
    const t0 = process.hrtime.bigint();
    m.fillMask(mask);
    run.maskMicros.push(Number(process.hrtime.bigint() - t0) / 1000);
    const forced = m.forcedToken();
    if (forced !== null) {
      m.accept(forced);
      run.tokens.push(forced);
      run.forcedSteps++;
      continue;
    }
    // Softmax sampling over random logits, done as Gumbel-max: argmax(logit + Gumbel noise).
    let pick = -1;
    let best = -Infinity;
    for (let w = 0; w < mask.length; w++) {
      let x = mask[w];
      while (x) {
        const bit = 31 - Math.clz32(x);
        x &= ~(1 << bit);
        const id = w * 32 + bit;
        const logit = rand() * scale + (id === 0 ? (opts.eosBias ?? 0) : 0);
        const score = logit - Math.log(-Math.log(rand() + 1e-300));
        if (score > best) {
          best = score;
          pick = id;
        }
      }
    }
    if (pick < 0) throw new Error('mask allows no token');
    m.accept(pick);
    if (pick === 0) break;
    run.tokens.push(pick);
  }
  return run;
}
