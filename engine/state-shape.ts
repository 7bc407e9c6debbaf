// What a snapshot of a slot's state may be for a given backend: a fixed part of stateSize floats, then (for a
// state that grows, RWKV-7b) one row of stateRowFloats per cached token, at most maxStateRows rows. The one place
// that checks a snapshot's length, so slots, the prefix cache, state files and initial states accept exactly the
// snapshots the backend can hold, and a hostile size is refused with the numbers before anything is allocated.

import type { InferenceBackend } from './types';
import { RequestError } from './errors';

/** Context limit of a growing state when the operator sets none (engine config maxContext). */
export const DEFAULT_MAX_CONTEXT = 4096;
/** Highest context limit an operator may set. */
export const MAX_CONTEXT = 1 << 20;

/** The sizes a snapshot is judged by (a backend's, or a model's before its backend exists). */
export type StateShape = Pick<InferenceBackend, 'stateSize' | 'stateRowFloats' | 'maxStateRows'>;

/** A shape, or a bare float count: a fixed-size state of that many floats. */
export function asShape(shape: StateShape | number): StateShape {
  return typeof shape === 'number' ? { stateSize: shape } : shape;
}

/** Floats per cached token row (0: a fixed-size state). */
export function rowFloats(shape: StateShape): number {
  return shape.stateRowFloats ?? 0;
}

/** Most rows a snapshot may carry (0 for a fixed-size state). */
export function maxRows(shape: StateShape): number {
  return rowFloats(shape) > 0 ? (shape.maxStateRows ?? 0) : 0;
}

/** Floats in a snapshot of `rows` cached rows. */
export function snapshotFloats(shape: StateShape, rows: number): number {
  return shape.stateSize + rows * rowFloats(shape);
}

/** Largest snapshot (floats) this shape allows: the fixed part plus the context limit's rows. */
export function maxSnapshotFloats(shape: StateShape): number {
  return snapshotFloats(shape, maxRows(shape));
}

/** Why a snapshot of `floats` floats does not fit `shape`, or null when it does. */
export function snapshotProblem(shape: StateShape, floats: number): string | null {
  const per = rowFloats(shape);
  if (per === 0) return floats === shape.stateSize ? null : `has ${floats} floats, the model's state has ${shape.stateSize}`;
  const extra = floats - shape.stateSize;
  if (!Number.isInteger(floats) || extra < 0 || extra % per !== 0)
    return `has ${floats} floats, the model's state has ${shape.stateSize} plus ${per} per cached token`;
  const rows = extra / per;
  if (rows > maxRows(shape)) return `holds ${rows} cached tokens, more than the context limit of ${maxRows(shape)} (maxContext in the engine config)`;
  return null;
}

/** Cached rows of a snapshot of `floats` floats; throws a RangeError naming `what` when it does not fit `shape`. */
export function snapshotRows(shape: StateShape, floats: number, what = 'state'): number {
  const problem = snapshotProblem(shape, floats);
  if (problem) throw new RangeError(`${what} ${problem}`);
  const per = rowFloats(shape);
  return per === 0 ? 0 : (floats - shape.stateSize) / per;
}

/** How the context limit's room for a request is made up, in words (for messages about a budget it set). */
export function contextUse(shape: StateShape, initial: Float32Array | null, prompt: number): string {
  const cached = initial ? snapshotRows(shape, initial.length, 'the initial state') : 0;
  return `maxContext ${maxRows(shape)} in the engine config minus the prompt's ${prompt} tokens` + (cached ? ` and the initial state's ${cached}` : '');
}

/**
 * Tokens a request may still add to a growing state that starts from `initial` (null: the zero state) and runs
 * `prompt` tokens; Infinity for a fixed-size state. Throws a RequestError naming the numbers when the prompt alone
 * passes the operator's context limit.
 */
export function contextRoom(shape: StateShape, initial: Float32Array | null, prompt: number, needed = 1): number {
  if (rowFloats(shape) === 0) return Infinity;
  const cached = initial ? snapshotRows(shape, initial.length, 'the initial state') : 0;
  const limit = maxRows(shape);
  const room = limit - cached - prompt;
  if (room < needed)
    throw new RequestError(
      `the prompt (${prompt} tokens${cached ? ` after the initial state's ${cached}` : ''}) ${needed ? 'leaves no room in' : 'passes'} this model's ` +
        `context limit of ${limit} tokens (its state grows per token; maxContext in the engine config)`,
    );
  return room;
}
