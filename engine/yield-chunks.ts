// House rule: work a request causes never blocks the event loop for long. Work that grows with a state's size (a
// growing RWKV-7b state: up to maxContext rows, hundreds of MiB) runs in pieces of at most YIELD_FLOATS floats with a
// turn of the event loop between them, so the longest synchronous stretch is bounded by the piece, not the context.

/** Floats one piece of state work handles between two turns (1 MiB: well under a millisecond to check or copy). */
export const YIELD_FLOATS = 1 << 18;

/** Resolves on a later turn of the event loop, after the I/O and timers that are due. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Runs `step(from, to)` over [0, length) in pieces of at most `piece`, a turn of the event loop before each but the first. */
export async function inPieces(length: number, piece: number, step: (from: number, to: number) => void): Promise<void> {
  if (!(piece >= 1)) throw new RangeError(`piece must be at least 1, got ${piece}`);
  for (let from = 0; from < length; from += piece) {
    if (from > 0) await nextTurn();
    step(from, Math.min(length, from + piece));
  }
}

/** Whether every value is finite, checked YIELD_FLOATS at a time. */
export async function allFinite(values: Float32Array): Promise<boolean> {
  let finite = true;
  await inPieces(values.length, YIELD_FLOATS, (from, to) => {
    if (!finite) return;
    for (let i = from; i < to; i++)
      if (!Number.isFinite(values[i])) {
        finite = false;
        return;
      }
  });
  return finite;
}
