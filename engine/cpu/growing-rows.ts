// The part of each slot's state that grows by one row per token (RWKV-7b's attention cache), kept by the CPU
// backend's compute thread beside the shared memory: a slot's rows are one Float32Array that doubles when full,
// so appending is amortised O(1) and the fixed-size memory the kernels share never has to move. The host reads
// and writes them through the thread (cpu-worker.ts messages), ordered with the calls as the rest of the state.

/** A slot's rows below this many floats keep their buffer on reset (a fresh slot reuses it); larger ones give it back. */
const KEEP_ON_RESET_FLOATS = 1 << 20;

export class GrowingRows {
  private readonly buffers: Float32Array[];
  private readonly counts: number[];

  constructor(
    slots: number,
    /** Floats per row. */
    readonly rowFloats: number,
    /** Most rows a slot may hold (the operator's context limit): doubling stops there, so memory stays within it. */
    readonly maxRows = Infinity,
  ) {
    this.buffers = Array.from({ length: slots }, () => new Float32Array(0));
    this.counts = new Array<number>(slots).fill(0);
  }

  /** Rows the slot holds. */
  count(slot: number): number {
    return this.counts[slot];
  }

  /** The slot's buffer (rows from 0, `count` of them valid); valid until the next reserve, write or reset. */
  buffer(slot: number): Float32Array {
    return this.buffers[slot];
  }

  /** Makes room for `extra` more rows (by doubling) and returns the buffer; the count is unchanged. */
  reserve(slot: number, extra: number): Float32Array {
    const need = (this.counts[slot] + extra) * this.rowFloats;
    const old = this.buffers[slot];
    if (need <= old.length) return old;
    const grown = new Float32Array(Math.max(need, Math.min(Math.max(2 * old.length, 16 * this.rowFloats), this.maxRows * this.rowFloats)));
    grown.set(old.subarray(0, this.counts[slot] * this.rowFloats));
    this.buffers[slot] = grown;
    return grown;
  }

  /** Sets the slot's row count after rows up to it were written into the reserved buffer. */
  commit(slot: number, rows: number): void {
    if (rows * this.rowFloats > this.buffers[slot].length) throw new Error(`internal: ${rows} rows committed past the reserved room`);
    this.counts[slot] = rows;
  }

  /** A copy of the slot's rows. */
  read(slot: number): Float32Array {
    return this.buffers[slot].slice(0, this.counts[slot] * this.rowFloats);
  }

  /** Replaces the slot's rows (a whole number of rows, checked by the host). */
  write(slot: number, rows: Float32Array): void {
    if (rows.length % this.rowFloats !== 0) throw new Error(`internal: ${rows.length} floats are not whole rows of ${this.rowFloats}`);
    this.counts[slot] = 0;
    // A short state written over a long one: a large buffer goes, as on reset, so memory follows the live context.
    const old = this.buffers[slot];
    if (old.length > KEEP_ON_RESET_FLOATS && old.length > 4 * rows.length) this.buffers[slot] = new Float32Array(0);
    this.reserve(slot, rows.length / this.rowFloats).set(rows);
    this.counts[slot] = rows.length / this.rowFloats;
  }

  copy(from: number, to: number): void {
    if (from === to) return;
    this.write(to, this.buffers[from].subarray(0, this.counts[from] * this.rowFloats));
  }

  reset(slot: number): void {
    this.counts[slot] = 0;
    if (this.buffers[slot].length > KEEP_ON_RESET_FLOATS) this.buffers[slot] = new Float32Array(0);
  }
}
