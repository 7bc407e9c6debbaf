// One generate() request inside the scheduler: samples a token from each step's logits, streams
// the decoded text through the stop matcher (partial UTF-8 and partial stop strings are held
// back), applies the grammar constraint, and ends on a stop string, end of text, max tokens,
// grammar completion or abort.

import type { GenerateEvent, TokenLogprob } from './api';
import type { CompiledConstraintLike, ConstraintMatcherLike } from './constraint';
import type { EventChannel } from './event-channel';
import type { InitialState } from './initial-states';
import type { TokenSampler } from './samplers';
import type { DrawLogProbs } from './samplers/token-sampler';
import type { Feed, SlotTask, TaskStart } from './slot-task';
import { RequestError } from './errors';
import { StopMatcher } from './stop-matcher';
import type { DrawParams, JobResult, LogitAdjust, TopLogits } from './types';
import type { VocabMapping } from './vocab-mapping';

export const END_OF_TEXT = 0;

type StopReason = Extract<GenerateEvent, { type: 'stop' }>['reason'];

export interface GenerateTaskParams {
  initial: InitialState;
  prompt: number[];
  /** Prompt positions whose state the prefix cache should keep (the end of a shared part). */
  checkpoints?: number[];
  signal: AbortSignal;
  sampler: TokenSampler;
  stop: string[];
  maxTokens: number;
  /**
   * Where maxTokens came from when the request did not set it (the context limit's room, or the default), for the
   * message that refuses a grammar too long for it; undefined: the request set it.
   */
  maxTokensOrigin?: string;
  mapping: VocabMapping;
  decodeBytes: (worldIds: number[]) => Uint8Array;
  constraint: CompiledConstraintLike | null;
  /** Parse the final text as JSON (jsonSchema requests). */
  parseJson: boolean;
  channel: EventChannel<GenerateEvent>;
  /** Entries of the backend's 'top' output (0: none); decode steps use it when the sampler can. */
  topCapacity?: number;
  /** Report logprobs with this many alternatives per token; null (default): none. */
  topLogprobs?: number | null;
}

export class GenerateTask implements SlotTask {
  readonly initial: InitialState;
  readonly prompt: number[];
  readonly checkpoints: readonly number[];
  readonly signal: AbortSignal;
  private readonly p: GenerateTaskParams;
  private readonly stop: StopMatcher;
  private readonly decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  private readonly matcher: ConstraintMatcherLike | null;
  private readonly mask: Uint32Array | null;
  /** The grammar's mask over model rows: sent with a 'top' step (masked on the GPU) or applied to a full row. */
  private readonly allowedRows: Uint32Array | null;
  private readonly submitted = performance.now();
  private admitted = 0;
  private firstToken = 0;
  private completion = 0;
  private text = '';
  private unreportedTokens: number[] = [];
  private unreportedLogprobs: TokenLogprob[] = [];
  private logprobSum = 0;
  private logprobCount = 0;
  private readonly tokenDecoder = new TextDecoder('utf-8');
  private finished = false;
  /** Once a sampled token would leave no room to close the output: the tokens that close it. */
  private closing: number[] | null = null;

  constructor(params: GenerateTaskParams) {
    this.p = params;
    this.initial = params.initial;
    this.prompt = params.prompt;
    this.checkpoints = params.checkpoints ?? [];
    this.signal = params.signal;
    this.stop = new StopMatcher(params.stop);
    this.matcher = params.constraint ? params.constraint.newMatcher() : null;
    // Nothing is queued for a request whose shortest valid output cannot fit its budget.
    if (this.matcher?.fits && !this.matcher.fits(params.maxTokens))
      throw new RequestError(
        `${params.maxTokensOrigin ?? `maxTokens ${params.maxTokens}`} is too small for this ${params.parseJson ? 'schema' : 'grammar'}: ` +
          'its shortest valid output takes more tokens',
      );
    this.mask = this.matcher ? new Uint32Array(Math.ceil(65536 / 32)) : null;
    this.allowedRows = this.matcher ? new Uint32Array(Math.ceil(params.mapping.rows / 32)) : null;
    if (this.wantsLogprobs) params.sampler.recordLogProbs(params.topLogprobs!);
  }

  private get wantsLogprobs(): boolean {
    return this.p.topLogprobs !== undefined && this.p.topLogprobs !== null;
  }

  onQueued(position: number): void {
    this.p.channel.push({ type: 'queued', position });
  }

  onStart(info: TaskStart): void {
    this.admitted = performance.now();
    this.p.channel.push({ type: 'start', promptTokens: this.prompt.length, cachedTokens: info.cachedTokens });
  }

  onPrefillProgress(done: number, total: number): void {
    this.p.channel.push({ type: 'prefill', done, total });
  }

  onPrefilled(logits: Float32Array): Feed | null {
    return this.next(logits);
  }

  onFed(result: JobResult): Feed | null {
    if (!result) throw new Error('decode step returned no logits');
    return this.next(result);
  }

  onAbort(): void {
    this.finish('abort');
  }

  onError(error: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.p.channel.fail(error);
  }

  private next(logits: Float32Array | TopLogits): Feed | null {
    if (!this.mayTake()) return null;
    const row = this.pick(logits);
    const draw = this.wantsLogprobs ? this.p.sampler.takeLogProbs() : null;
    return this.accept(row, draw) ? null : this.feedAfter(row);
  }

  /** Before a token is taken: false when the task has ended, or ends now with its budget spent. */
  private mayTake(): boolean {
    if (this.finished) return false;
    if (this.firstToken === 0) this.firstToken = performance.now();
    if (this.completion < this.p.maxTokens) return true;
    this.finish('length');
    return false;
  }

  /** Takes a drawn row into the output; true when the task ended with it (end of text, a stop, the grammar, length). */
  private accept(row: number, draw: DrawLogProbs | null): boolean {
    const id = this.p.mapping.rowToWorld(row);
    if (id === END_OF_TEXT) {
      this.finish('eos');
      return true;
    }
    if (this.wantsLogprobs) this.noteLogprob(id, draw && draw.row === row ? draw : null);
    this.matcher?.accept(id);
    this.completion++;
    this.unreportedTokens.push(id);
    const piece = this.decoder.decode(this.p.decodeBytes([id]), { stream: true });
    this.emit(this.stop.push(piece));
    if (this.stop.stopped) {
      this.finish('stop');
      return true;
    }
    if (this.matcher?.isDone()) {
      this.finish('grammar');
      return true;
    }
    if (this.completion >= this.p.maxTokens) {
      this.finish('length');
      return true;
    }
    return false;
  }

  /** What to feed after `row`. Decode steps read back the GPU-reduced top of the logits instead of the whole row where that is exact. */
  private feedAfter(row: number): Feed {
    if (this.p.sampler.canSampleTop(this.p.topCapacity ?? 0)) return { tokens: [row], output: 'top', adjust: this.topAdjust() };
    return { tokens: [row], output: 'last' };
  }

  drawParams(): DrawParams | null {
    if (this.finished || this.matcher || this.wantsLogprobs) return null;
    return this.p.sampler.drawParams(this.p.topCapacity ?? 0);
  }

  drawBudget(): number {
    return this.finished ? 0 : this.p.maxTokens - this.completion;
  }

  takeUniforms(steps: number): Float32Array {
    return this.p.sampler.takeUniforms(steps);
  }

  /** The rows a draw call drew, taken one by one as next() takes a sampled one; those after the task ended are dropped. */
  onDrawn(rows: Int32Array): Feed | null {
    for (const row of rows) {
      if (!this.mayTake()) return null;
      if (row < 0) throw new Error('no token is allowed at this point (all logits masked)');
      this.p.sampler.recordDrawn(row);
      if (this.accept(row, null)) return null;
    }
    if (rows.length === 0) throw new Error('a draw call gave no rows');
    return this.feedAfter(rows[rows.length - 1]);
  }

  /**
   * What the GPU applies before reducing the next row: bias and penalties, and the grammar's mask. The mask
   * is the one pick() would apply (the matcher does not move before then); a forced next token needs none.
   */
  private topAdjust(): LogitAdjust | undefined {
    const adjust = this.p.sampler.adjustments();
    const m = this.matcher;
    if (!m || this.closing || m.forcedToken() !== null) return adjust;
    return { rows: adjust?.rows ?? new Int32Array(0), deltas: adjust?.deltas ?? new Float32Array(0), allowed: this.rowMask(m) };
  }

  /** Model rows the grammar allows next; end of text only where the output may end. */
  private rowMask(m: ConstraintMatcherLike): Uint32Array {
    const mask = this.mask!;
    mask.fill(0);
    m.fillMask(mask);
    if (m.isAccepting()) mask[0] |= 1;
    else mask[0] &= ~1;
    return this.p.mapping.rowBitsFromWorldBitset(mask, this.allowedRows!);
  }

  /**
   * Sample a row, honouring the grammar: forced tokens skip sampling; end of text only when accepting.
   * The shortest completion is reserved before every token: a token is taken only when the output can
   * still be closed within the budget after it; otherwise the output is closed along its shortest
   * completion (which fitted before this step), so a length-limited request still conforms.
   */
  private pick(logits: Float32Array | TopLogits): number {
    const m = this.matcher;
    if (!m) return logits instanceof Float32Array ? this.p.sampler.sample(logits) : this.p.sampler.sampleTop(logits);
    if (this.closing) return this.closingRow();
    const id = this.candidate(m, logits);
    const left = this.p.maxTokens - this.completion;
    if (!m.fitsAfter || m.fitsAfter(id, left - 1)) return this.p.mapping.worldToRow(id);
    this.closing = m.completionTokens(left) ?? [];
    return this.closingRow();
  }

  /** The next token of the closing completion, end of text once it is written. */
  private closingRow(): number {
    const id = this.closing!.shift() ?? END_OF_TEXT;
    const row = this.p.mapping.worldToRow(id);
    if (row < 0) throw new Error(`closing the output needs token ${id}, which the model's vocabulary lacks`);
    return row;
  }

  /** The token the grammar forces, or the one sampled under its mask (World id). */
  private candidate(m: ConstraintMatcherLike, logits: Float32Array | TopLogits): number {
    const forced = m.forcedToken();
    if (forced !== null) {
      if (this.p.mapping.worldToRow(forced) < 0) throw new Error(`grammar forces token ${forced}, which the model's vocabulary lacks`);
      return forced;
    }
    // A 'top' result was reduced over the rows topAdjust() allowed.
    const row = logits instanceof Float32Array ? this.p.sampler.sample(logits, this.rowMask(m)) : this.p.sampler.sampleTop(logits);
    return this.p.mapping.rowToWorld(row);
  }

  /** The token's log-probability from its draw; a token nothing was drawn for (forced by the grammar) has 0. */
  private noteLogprob(id: number, draw: DrawLogProbs | null): void {
    const entry: TokenLogprob = { id, token: this.tokenText(id), logprob: draw ? draw.logprob : 0 };
    if (this.p.topLogprobs! > 0) {
      entry.top = (draw?.top ?? []).map((t) => {
        const alt = this.p.mapping.rowToWorld(t.row);
        return { id: alt, token: this.tokenText(alt), logprob: t.logprob };
      });
    }
    this.unreportedLogprobs.push(entry);
    this.logprobSum += entry.logprob;
    this.logprobCount++;
  }

  private tokenText(id: number): string {
    return this.tokenDecoder.decode(this.p.decodeBytes([id]));
  }

  private emit(text: string): void {
    if (text.length === 0) return;
    this.text += text;
    this.p.channel.push({
      type: 'delta',
      text,
      tokens: this.unreportedTokens,
      ...(this.wantsLogprobs && { logprobs: this.unreportedLogprobs }),
    });
    this.unreportedTokens = [];
    this.unreportedLogprobs = [];
  }

  private finish(reason: StopReason): null {
    if (this.finished) return null;
    this.finished = true;
    if (!this.stop.stopped) this.emit(this.stop.push(this.decoder.decode()) + this.stop.flush());
    const end = performance.now();
    const admitted = this.admitted || end;
    const first = this.firstToken || end;
    let json: unknown;
    try {
      if (this.p.constraint && reason !== 'abort') {
        if (this.p.constraint.validateOutput(this.text) === false) throw new Error('output does not conform to the grammar');
      }
      if (this.p.parseJson && reason !== 'abort') json = JSON.parse(this.text);
    } catch (e) {
      this.p.channel.fail(new Error(`constrained output rejected (stop reason ${reason}): ${(e as Error).message}`));
      return null;
    }
    this.p.channel.push({
      type: 'stop',
      reason,
      text: this.text,
      ...(json !== undefined ? { json } : {}),
      ...(this.wantsLogprobs && { meanLogprob: this.logprobCount > 0 ? this.logprobSum / this.logprobCount : 0 }),
      promptTokens: this.prompt.length,
      completionTokens: this.completion,
      timing: {
        queueMs: admitted - this.submitted,
        prefillMs: first - admitted,
        decodeMs: end - first,
        totalMs: end - this.submitted,
      },
    });
    this.p.channel.end();
    return null;
  }
}
