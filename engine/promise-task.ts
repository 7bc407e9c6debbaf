// Slot tasks that produce one value: scoring a continuation (choose) and reading the state after
// a prompt (embed, saveConversation).

import { AbortError } from './errors';
import type { InitialState } from './initial-states';
import type { Feed, SlotTask } from './slot-task';

abstract class PromiseTask<T> implements SlotTask {
  readonly promise: Promise<T>;
  protected resolve!: (value: T) => void;
  private reject!: (error: Error) => void;

  constructor(
    readonly initial: InitialState,
    readonly prompt: readonly number[],
    readonly signal: AbortSignal | undefined,
    readonly cachePrompt: 'auto' | 'always' | 'never',
  ) {
    this.promise = new Promise<T>((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
    // The caller may never await a failed task (Promise.all stops at the first error).
    this.promise.catch(() => {});
  }

  abstract onPrefilled(logits: Float32Array, state: Float32Array | null): Feed | null;

  onFed(_logits: Float32Array | null): Feed | null {
    throw new Error(`${this.constructor.name} fed unexpectedly`);
  }

  onAbort(): void {
    this.reject(new AbortError());
  }

  onError(error: Error): void {
    this.reject(error);
  }
}

/** Natural-log softmax probability of `row` in one vocabulary-sized slice of logits. */
export function logProbOf(logits: Float32Array, offset: number, vocab: number, row: number): number {
  let max = -Infinity;
  for (let i = offset; i < offset + vocab; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = offset; i < offset + vocab; i++) sum += Math.exp(logits[i] - max);
  return logits[offset + row] - max - Math.log(sum);
}

/** Sum of log-probabilities of `continuation` after `prompt`, from one prefill and one 'all' feed. */
export class ScoreTask extends PromiseTask<number> {
  private logProb = 0;

  constructor(
    initial: InitialState,
    prompt: readonly number[],
    private readonly continuation: readonly number[],
    private readonly vocab: number,
    signal: AbortSignal | undefined,
  ) {
    super(initial, prompt, signal, 'always');
    if (continuation.length === 0) throw new Error('nothing to score');
  }

  onPrefilled(logits: Float32Array): Feed | null {
    this.logProb = logProbOf(logits, 0, this.vocab, this.continuation[0]);
    if (this.continuation.length === 1) return this.done();
    // Feeding all but the last token gives the predictions for tokens 1..n-1.
    return { tokens: this.continuation.slice(0, -1), output: 'all' };
  }

  onFed(logits: Float32Array | null): Feed | null {
    if (!logits) throw new Error('scoring returned no logits');
    for (let i = 1; i < this.continuation.length; i++) {
      this.logProb += logProbOf(logits, (i - 1) * this.vocab, this.vocab, this.continuation[i]);
    }
    return this.done();
  }

  private done(): null {
    this.resolve(this.logProb);
    return null;
  }
}

/** The slot's state and logits once the prompt is in. */
export class StateTask extends PromiseTask<{ state: Float32Array; logits: Float32Array }> {
  readonly wantsState = true;

  constructor(initial: InitialState, prompt: readonly number[], signal: AbortSignal | undefined) {
    super(initial, prompt, signal, 'auto');
  }

  onPrefilled(logits: Float32Array, state: Float32Array | null): Feed | null {
    if (!state) throw new Error('state was not read');
    this.resolve({ state, logits });
    return null;
  }
}

/**
 * The mean, over the prompt's tokens, of one part of the state (e.g. a layer's channel-mix input, which is
 * that token's normalised hidden vector there). The backend keeps only the last token's, so the prompt is
 * fed one token at a time with the state read after each: one step and one state read per token. Not cached:
 * its one-token prompt is no prefix worth keeping.
 */
export class MeanStateTask extends PromiseTask<Float32Array> {
  readonly wantsState = true;
  readonly fixedStateOnly = true; // one layer's ffn_x after every token: a growing state's rows are never looked at
  private readonly sum: Float64Array;
  private count = 0;

  constructor(
    initial: InitialState,
    private readonly tokens: readonly number[],
    private readonly part: { offset: number; length: number },
    signal: AbortSignal | undefined,
  ) {
    super(initial, tokens.slice(0, 1), signal, 'never');
    if (tokens.length === 0) throw new Error('nothing to average');
    this.sum = new Float64Array(part.length);
  }

  onPrefilled(_logits: Float32Array, state: Float32Array | null): Feed | null {
    return this.add(state);
  }

  onFed(_result: unknown, state?: Float32Array): Feed | null {
    return this.add(state ?? null);
  }

  private add(state: Float32Array | null): Feed | null {
    if (!state) throw new Error('state was not read');
    const { offset, length } = this.part;
    for (let i = 0; i < length; i++) this.sum[i] += state[offset + i];
    this.count++;
    if (this.count < this.tokens.length) return { tokens: [this.tokens[this.count]], output: 'none', readState: true };
    this.resolve(Float32Array.from(this.sum, (v) => v / this.count));
    return null;
  }
}

/** Only prefill (and cache) a prompt, e.g. before scoring many continuations of it in parallel. */
export class WarmTask extends PromiseTask<void> {
  constructor(initial: InitialState, prompt: readonly number[], signal: AbortSignal | undefined) {
    super(initial, prompt, signal, 'always');
  }

  onPrefilled(): Feed | null {
    this.resolve();
    return null;
  }
}
