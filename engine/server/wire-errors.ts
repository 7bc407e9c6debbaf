// Errors across the wire between `rwkv-flow serve` and the remote engine: the server sends the error's class
// name and message, the client rebuilds an error of the same class with the same message, so a node shows
// the same text and `instanceof QueueFullError` still holds whichever engine it talks to. Classes the
// client does not know (added later, or host errors) arrive as a plain Error carrying the sent name.

import { AbortError, EngineClosedError, QueueFullError, RequestError, StateFileError } from '../errors';
import { ConstraintError } from '../grammar/constraint-error';

export interface WireError {
  name: string;
  message: string;
  /** QueueFullError's bound. */
  maxQueue?: number;
  /** ConstraintError's place. */
  place?: string;
}

const KNOWN: Record<string, { prototype: Error }> = {
  RequestError,
  QueueFullError,
  AbortError,
  EngineClosedError,
  StateFileError,
  ConstraintError,
  RangeError,
  TypeError,
};

export function toWireError(err: unknown): WireError {
  const e = err instanceof Error ? err : new Error(String(err));
  const wire: WireError = { name: e.name || 'Error', message: e.message };
  if (e instanceof QueueFullError) wire.maxQueue = e.maxQueue;
  if (e instanceof ConstraintError && e.place !== undefined) wire.place = e.place;
  return wire;
}

/** An error of the sent class with the sent message (not re-derived from constructor arguments). */
export function fromWireError(wire: unknown, fallback: string): Error {
  const w = (wire && typeof wire === 'object' ? wire : {}) as Partial<WireError>;
  const name = typeof w.name === 'string' && w.name ? w.name : 'Error';
  const message = typeof w.message === 'string' ? w.message : fallback;
  const err = new Error(message);
  const known = Object.prototype.hasOwnProperty.call(KNOWN, name) ? KNOWN[name] : undefined;
  if (known) Object.setPrototypeOf(err, known.prototype);
  // Own property: class prototypes set `name` in their constructors, which were not run here.
  Object.defineProperty(err, 'name', { value: name, enumerable: false, configurable: true, writable: true });
  if (typeof w.maxQueue === 'number') (err as QueueFullError & { maxQueue: number }).maxQueue = w.maxQueue;
  if (typeof w.place === 'string') (err as ConstraintError).place = w.place;
  return err;
}

/** The HTTP status an engine error answers with. */
export function statusOf(err: unknown): number {
  if (err instanceof QueueFullError) return 429;
  if (err instanceof EngineClosedError) return 503;
  if (err instanceof AbortError) return 499;
  if (err instanceof RequestError || err instanceof ConstraintError || err instanceof StateFileError) return 400;
  const name = err instanceof Error ? err.name : '';
  if (name === 'ParameterError') return 400;
  return 500;
}
