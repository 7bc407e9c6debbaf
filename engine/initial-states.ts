// Named initial states (state-tuned or saved conversations) that requests can start from. Each
// has its own prefix cache, since the same tokens give different states from different starts; all
// caches share one byte budget, and the number of named states is bounded (maxStates). A growing state (RWKV-7b)
// can carry up to a whole context of cached rows (192 MiB at 4,096 tokens of the 0.1B shape), so the rows of all
// named states together are bounded too, by the same operator setting as the caches (cacheBytes): maxStates alone
// let a caller pin tens of GiB by loading saved conversations.
// Requests hold the InitialState object itself, so unloading or replacing a name never changes
// the state under a running request.

import type { StateInfo } from './api';
import { RequestError } from './errors';
import { hasEmbeddedTimeState } from './model-spec';
import { CacheBudget, PrefixCache } from './prefix-cache';
import { stateFromTimeState } from './state-file';
import { asShape, rowFloats, snapshotProblem, snapshotRows, type StateShape } from './state-shape';
import type { Checkpoint, ModelInfo } from './types';

export interface InitialState {
  /** '' for the zero state. */
  readonly name: string;
  readonly source: string;
  /** null = the model's zero state (the default state of a model without an embedded time_state). */
  readonly state: Float32Array | null;
  /** Logits after the state's last token, when known (saved conversations); lets a prompt be empty. */
  readonly logits: Float32Array | null;
  readonly cache: PrefixCache;
}

const NAME_PATTERN = /^[\w.\- ]{1,128}$/;

export const DEFAULT_MAX_STATES = 64;

/**
 * The model's own default initial state: a state-tuned model merged into one file embeds its tuned
 * `blocks.N.att.time_state` (checked by describeModel), converted as for a state-tuning file; null when
 * the model has none (its default is then the zero state).
 */
export function embeddedInitialState(ck: Checkpoint, info: ModelInfo, stateSize: number): Float32Array | null {
  return hasEmbeddedTimeState(ck) ? stateFromTimeState(ck, info, stateSize, 'the model\'s embedded time_state') : null;
}

export class InitialStateRegistry {
  readonly zero: InitialState;
  /** The one byte bound of every state's prefix cache. */
  readonly cacheBudget: CacheBudget;
  private readonly states = new Map<string, InitialState>();
  /** Names being loaded (file still being read) → number of loads in progress. */
  private readonly pending = new Map<string, number>();
  /** The sizes a state of this model may have (a growing state's rows included). */
  private readonly shape: StateShape;

  /** `modelDefault`: the model's embedded state (embeddedInitialState), which then replaces the zero state. */
  constructor(
    shapeOrSize: StateShape | number,
    cacheBytes: number,
    readonly maxStates = DEFAULT_MAX_STATES,
    modelDefault: Float32Array | null = null,
  ) {
    if (!Number.isInteger(maxStates) || maxStates < 0) throw new RangeError(`maxStates must be an integer >= 0, got ${maxStates}`);
    this.shape = asShape(shapeOrSize);
    const problem = modelDefault && snapshotProblem(this.shape, modelDefault.length);
    if (problem) throw new RangeError(`the model's default state ${problem}`);
    this.cacheBudget = new CacheBudget(cacheBytes);
    const source = modelDefault ? 'embedded time_state' : 'zero';
    this.zero = { name: '', source, state: modelDefault, logits: null, cache: new PrefixCache(this.cacheBudget) };
  }

  /** Refuses a new name once maxStates are loaded or being loaded (replacing a name is always allowed). */
  checkRoomFor(name: string): void {
    if (this.states.has(name) || this.pending.has(name)) return;
    let taken = this.states.size;
    for (const other of this.pending.keys()) if (!this.states.has(other)) taken++;
    if (taken < this.maxStates) return;
    throw new RequestError(
      `cannot load state "${name}": ${taken} named states are loaded or loading, the limit of this model is ${this.maxStates} (maxStates in the model configuration); unload one first`,
    );
  }

  /**
   * Holds a place for `name` while its file is read, so many loads at once cannot all read their files
   * and overshoot maxStates. Call the returned function when the load has ended, either way.
   */
  reserve(name: string): () => void {
    this.checkRoomFor(name);
    this.pending.set(name, (this.pending.get(name) ?? 0) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = this.pending.get(name)! - 1;
      if (left > 0) this.pending.set(name, left);
      else this.pending.delete(name);
    };
  }

  /** What requests naming no state start from: the zero state, or the model configuration's default state. */
  private fallback: InitialState | null = null;

  /** Requests naming no state start from this one from now on (its own prefix cache, on the shared budget). */
  setDefault(state: Float32Array, source: string, logits: Float32Array | null): void {
    const problem = snapshotProblem(this.shape, state.length);
    if (problem) throw new RequestError(`default state ${source} ${problem}`);
    this.fallback?.cache.retire();
    this.fallback = { name: '', source, state, logits, cache: new PrefixCache(this.cacheBudget) };
  }

  /** The named state, or the default state (the zero state unless the configuration names one) for undefined/''. */
  resolve(name: string | undefined): InitialState {
    if (name === undefined || name === '') return this.fallback ?? this.zero;
    const found = this.states.get(name);
    if (!found) {
      const known = [...this.states.keys()];
      throw new RequestError(`unknown initial state "${name}" (loaded: ${known.length ? known.join(', ') : 'none'})`);
    }
    return found;
  }

  /** Bytes of the cached rows a snapshot carries beyond the fixed part (0 for a fixed-size state). */
  private rowBytes(state: Float32Array | null): number {
    return state && rowFloats(this.shape) > 0 ? snapshotRows(this.shape, state.length) * rowFloats(this.shape) * 4 : 0;
  }

  /** Refuses a state whose cached rows would take the named states' rows past cacheBytes (replacing `name` frees its own). */
  private checkRowBytes(name: string, state: Float32Array): void {
    const adding = this.rowBytes(state);
    if (adding === 0) return;
    let held = 0;
    for (const [other, s] of this.states) if (other !== name) held += this.rowBytes(s.state);
    const limit = this.cacheBudget.maxBytes;
    if (held + adding <= limit) return;
    const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
    throw new RequestError(
      `cannot load state "${name}": its ${snapshotRows(this.shape, state.length)} cached tokens take ${mib(adding)}, and the named states ` +
        `already hold ${mib(held)} of cached tokens; together they may hold ${mib(limit)} (cacheBytes in the model configuration); unload one first`,
    );
  }

  add(name: string, state: Float32Array, source: string, logits: Float32Array | null = null): StateInfo {
    InitialStateRegistry.checkName(name);
    const problem = snapshotProblem(this.shape, state.length);
    if (problem) throw new RequestError(`state "${name}" ${problem}`);
    this.checkRoomFor(name);
    this.checkRowBytes(name, state);
    this.states.get(name)?.cache.retire();
    this.states.set(name, { name, source, state, logits, cache: new PrefixCache(this.cacheBudget) });
    return InitialStateRegistry.info(this.states.get(name)!);
  }

  remove(name: string): boolean {
    // Its cache's bytes go back to the budget; a request still running from it caches nothing more.
    this.states.get(name)?.cache.retire();
    return this.states.delete(name);
  }

  list(): StateInfo[] {
    return [...this.states.values()].map(InitialStateRegistry.info);
  }

  static checkName(name: string): void {
    if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
      throw new RequestError(`state name must be 1-128 letters, digits, spaces, '_', '-' or '.', got ${JSON.stringify(name)}`);
    }
  }

  private static info(s: InitialState): StateInfo {
    return { name: s.name, source: s.source, bytes: (s.state?.byteLength ?? 0) + (s.logits?.byteLength ?? 0) };
  }
}
