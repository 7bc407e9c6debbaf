// One request's sampler: logit bias, repetition penalty and an optional allowed-token mask are
// applied to a copy of the logits, then the chosen method draws a row. Works in model rows;
// the bias (given in World ids) is mapped to rows once at construction.

import { RequestError } from '../errors';
import { MirostatState } from './mirostat';
import { pickNucleus } from './nucleus';
import { RepetitionPenalty } from './penalties';
import { RecentTokens } from './recent-tokens';
import { argmax, Candidates } from './probability';
import type { DrawParams, LogitAdjust, TopLogits } from '../types';
import type { ResolvedSamplerOptions } from './sampler-options';
import { SeededRandom } from './seeded-random';
import { pickTypical } from './typical';

/**
 * Scratch space of a sampling step (about 1.3 MB for 65536 rows). Sampling is synchronous and never
 * re-entered, so every sampler of a vocabulary size shares one: a thousand queued requests cost no memory.
 */
const scratchBySize = new Map<number, { logits: Float32Array; candidates: Candidates }>();

function scratchFor(rows: number) {
  let s = scratchBySize.get(rows);
  if (!s) scratchBySize.set(rows, (s = { logits: new Float32Array(rows), candidates: new Candidates(rows) }));
  return s;
}

/** A draw's row and its log-probability, and the most probable rows (see recordLogProbs). */
export interface DrawLogProbs {
  row: number;
  logprob: number;
  top: { row: number; logprob: number }[];
}

export class TokenSampler {
  private readonly rows: number;
  private readonly biasRows: [number, number][] = [];
  private readonly penalty: RepetitionPenalty;
  /** Tokens of the last repetitionWindow draws, for the multiplicative repetition penalty; null when it is off. */
  private readonly recent: RecentTokens | null;
  private readonly mirostat: MirostatState | null;
  private readonly random: SeededRandom;
  /** Alternatives to record with each draw; null: no log-probabilities are recorded. */
  private logProbTop: number | null = null;
  private lastDraw: DrawLogProbs | null = null;

  /**
   * @param rows number of logits (model rows)
   * @param worldToRow maps a World id to a model row, -1 when the model lacks it
   */
  constructor(
    readonly options: ResolvedSamplerOptions,
    rows: number,
    worldToRow: (id: number) => number,
  ) {
    this.rows = rows;
    const biasByRow = new Map<number, number>();
    for (const [id, bias] of options.logitBias) {
      const row = worldToRow(id);
      if (row < 0 || row >= rows) throw new RequestError(`sampler.logitBias token id ${id} is not in the model's vocabulary`);
      biasByRow.set(row, (biasByRow.get(row) ?? 0) + bias);
    }
    this.biasRows.push(...biasByRow);
    this.penalty = new RepetitionPenalty(options.presencePenalty, options.frequencyPenalty, options.penaltyDecay);
    this.recent = options.repetitionPenalty !== 1 ? new RecentTokens(options.repetitionWindow) : null;
    this.mirostat = options.kind === 'mirostat' ? new MirostatState(options.mirostatTau, options.mirostatEta) : null;
    this.random = options.seed === undefined ? SeededRandom.unseeded() : new SeededRandom(options.seed);
  }

  /**
   * Record with every draw the drawn row's log-probability and the `top` most probable rows', under the
   * distribution drawn from after bias, penalties and mask (before temperature and truncation).
   */
  recordLogProbs(top: number): void {
    this.logProbTop = top;
  }

  /** What the last draw recorded, once (null when nothing was drawn since, or recording is off). */
  takeLogProbs(): DrawLogProbs | null {
    const last = this.lastDraw;
    this.lastDraw = null;
    return last;
  }

  /** The distribution's normalizer and most probable rows, noted before min_p truncates the candidates. */
  private noteBefore(c: Candidates): { logZ: number; top: DrawLogProbs['top'] } | null {
    if (this.logProbTop === null) return null;
    const top = this.logProbTop > 0 ? Array.from(c.mostProbable(this.logProbTop), (j) => ({ row: c.rows[j], logprob: c.offsets[j] - c.logZ })) : [];
    return { logZ: c.logZ, top };
  }

  /** Notes the drawn row (one of the candidates) under the distribution noted before. */
  private noteAfter(c: Candidates, row: number, before: { logZ: number; top: DrawLogProbs['top'] } | null): void {
    if (!before) return;
    let logprob = -Infinity;
    for (let j = 0; j < c.count; j++) if (c.rows[j] === row) logprob = c.offsets[j] - before.logZ;
    this.lastDraw = { row, logprob, top: before.top };
  }

  /** Notes the drawn row from the candidates the draw used (built here for a greedy draw, which needs none). */
  private note(c: Candidates, row: number): void {
    this.noteAfter(c, row, this.noteBefore(c));
  }

  /** Nucleus or typical, after min_p. */
  private drawTruncated(c: Candidates, u: number): number {
    const o = this.options;
    const before = this.noteBefore(c);
    if (o.minP > 0) c.keepAbove(Math.log(o.minP));
    const row = o.kind === 'typical' ? pickTypical(c, o.topK, o.tau, o.temperature, u) : pickNucleus(c, o.topK, o.topP, o.temperature, u);
    this.noteAfter(c, row, before);
    return row;
  }

  /**
   * Whether the next draw can be made exactly from the `capacity` largest logits (a 'top' result):
   * greedy, nucleus whose top_k fits, or mirostat while its surprise bound keeps few enough tokens (it
   * moves every step, so ask again before each). Typical may keep tokens beyond any fixed count.
   */
  canSampleTop(capacity: number): boolean {
    const o = this.options;
    if (capacity <= 0) return false;
    // The repetition penalty scales each penalised logit by its sign: the GPU's additive adjust cannot express it.
    if (this.recent) return false;
    if (this.mirostat) return this.mirostat.maxCandidates <= capacity;
    return o.kind === 'nucleus' && (o.temperature === 0 || (o.topK >= 1 && o.topK <= capacity));
  }

  /**
   * How the GPU can make this sampler's next draws itself (InferenceBackend.runDraws), or null when it cannot: plain
   * nucleus (no min_p) or greedy whose top_k fits `capacity`, with logit bias and presence / frequency penalties
   * (kept on the GPU step to step), and no log-probabilities to record. The draws use the uniforms of takeUniforms and
   * must be told back through recordDrawn, so the sampler goes on as if it had drawn them.
   */
  drawParams(capacity: number): DrawParams | null {
    const o = this.options;
    if (this.logProbTop !== null || this.mirostat || this.recent || o.kind !== 'nucleus' || o.minP > 0) return null;
    if (!this.canSampleTop(capacity)) return null;
    const bias = { rows: new Int32Array(this.biasRows.length), values: new Float32Array(this.biasRows.length) };
    this.biasRows.forEach(([row, value], i) => ((bias.rows[i] = row), (bias.values[i] = value)));
    const n = this.penalty.size;
    const penalties = { rows: new Int32Array(n), values: new Float32Array(n) };
    let at = 0;
    this.penalty.forEach((row, penalty) => ((penalties.rows[at] = row), (penalties.values[at++] = penalty)));
    return {
      temperature: o.temperature,
      topK: o.topK,
      topP: o.topP,
      presence: o.presencePenalty,
      frequency: o.frequencyPenalty,
      decay: o.penaltyDecay,
      bias,
      penalties,
    };
  }

  /** The next `steps` uniforms of this sampler's stream (one a draw, as sample and sampleTop take them). */
  takeUniforms(steps: number): Float32Array {
    const u = new Float32Array(steps);
    // Kept below 1 as f32 (a value within 2^-25 of 1 would round up to it).
    for (let i = 0; i < steps; i++) u[i] = Math.min(this.random.next(), 1 - 2 ** -24);
    return u;
  }

  /** A row drawn on the GPU with drawParams: its penalty recorded as sampleTop would have. */
  recordDrawn(row: number): void {
    this.penalty.record(row);
  }

  /** Logit bias and current repetition penalties as the sparse additions `sample` would make. */
  adjustments(): LogitAdjust | undefined {
    // Mirostat records no penalties (see sample), so its penalty set is always empty here.
    const penalized = this.penalty.size;
    if (this.biasRows.length === 0 && penalized === 0) return undefined;
    // Penalties first, then bias rows no penalty covers; a bias on a penalized row adds to its delta.
    let extra = 0;
    for (const [row] of this.biasRows) if (this.penalty.indexOf(row) < 0) extra++;
    const rows = new Int32Array(penalized + extra);
    const deltas = new Float32Array(penalized + extra);
    this.penalty.write(rows, deltas);
    let next = penalized;
    for (const [row, bias] of this.biasRows) {
      const at = this.penalty.indexOf(row);
      if (at >= 0) deltas[at] += bias;
      else (rows[next] = row), (deltas[next++] = bias);
    }
    return { rows, deltas };
  }

  /** Draw the next row from a 'top' result reduced after `adjustments()`; only when `canSampleTop` holds. */
  sampleTop(top: TopLogits): number {
    const { candidates } = scratchFor(this.rows);
    const u = this.random.next();
    let row: number;
    if (top.finite === 0) throw new Error('no token is allowed at this point (all logits masked)');
    if (this.options.temperature === 0 && !this.mirostat) {
      row = top.rows[0];
      if (this.logProbTop !== null && candidates.fromTop(top)) this.note(candidates, row);
    } else {
      // Plain nucleus reads the candidates only through mostProbable(): best-first storage skips the row sort.
      const order = !this.mirostat && this.options.kind === 'nucleus' && !(this.options.minP > 0) ? 'best' : 'row';
      if (!candidates.fromTop(top, order)) throw new Error('no token is allowed at this point (all logits masked)');
      if (this.mirostat) {
        row = this.mirostat.pick(candidates, u);
        this.note(candidates, row);
        return row; // mirostat records no penalties (see sample)
      }
      row = this.drawTruncated(candidates, u);
    }
    this.penalty.record(row);
    return row;
  }

  /**
   * Draw the next row. `logits` is read-only (it may be shared with the prefix cache).
   * `allowed` forbids the rows whose bit is clear (bit r % 32 of word r >> 5; grammar constraints), the
   * same bitset the GPU takes for a 'top' result (LogitAdjust.allowed).
   */
  sample(logits: Float32Array, allowed?: Uint32Array): number {
    const { logits: x, candidates } = scratchFor(this.rows);
    if (logits.length !== x.length) throw new Error(`sampler: expected ${x.length} logits, got ${logits.length}`);
    x.set(logits);
    for (const [row, bias] of this.biasRows) x[row] += bias;
    if (this.options.kind !== 'mirostat') this.penalty.apply(x);
    this.recent?.penalize(x, this.options.repetitionPenalty);
    if (allowed) for (let i = 0; i < x.length; i++) if (!((allowed[i >>> 5] >>> (i & 31)) & 1)) x[i] = -Infinity;
    // A draw is consumed every step, even for greedy picks, so the stream stays aligned.
    const u = this.random.next();
    let row: number;
    if (this.options.temperature === 0 && this.options.kind !== 'mirostat') {
      row = argmax(x);
      if (row < 0) throw new Error('no token is allowed at this point (all logits masked)');
      if (this.logProbTop !== null && candidates.fromLogits(x)) this.note(candidates, row);
    } else {
      const c = candidates;
      if (!c.fromLogits(x)) throw new Error('no token is allowed at this point (all logits masked)');
      if (this.mirostat) {
        row = this.mirostat.pick(c, u);
        this.note(c, row);
      } else row = this.drawTruncated(c, u);
    }
    if (this.options.kind !== 'mirostat') this.penalty.record(row);
    this.recent?.push(row);
    return row;
  }
}
