// The fake backend (fake-backend.ts) with a state that grows like RWKV-7b's: each token fed adds one row of
// ROW_FLOATS to its slot's snapshot, and a call that would take a slot past maxStateRows is refused as the CPU
// runtime refuses it. Lets engine and scheduler tests see whether any path feeds a slot past the context limit.

import type { SlotJob } from '../engine/types';
import { FakeBackend, type FakeBackendOptions } from './fake-backend';

export const ROW_FLOATS = 4;

export class GrowingFakeBackend extends FakeBackend {
  readonly stateRowFloats = ROW_FLOATS;
  /** Calls refused for passing the limit (the test asserts none happened). */
  readonly refused: string[] = [];
  private readonly rows: number[];

  constructor(
    opts: FakeBackendOptions,
    readonly maxStateRows: number,
  ) {
    super(opts);
    this.rows = new Array<number>(opts.slots).fill(0);
  }

  override run(jobs: SlotJob[]): Promise<(Float32Array | null)[]> {
    for (const j of jobs) {
      const held = this.rows[j.slot] + j.tokens.length;
      if (held > this.maxStateRows) {
        const why = `slot ${j.slot} would hold ${held} tokens of context, more than the context limit of ${this.maxStateRows}`;
        this.refused.push(why);
        return Promise.reject(new RangeError(why));
      }
    }
    for (const j of jobs) this.rows[j.slot] += j.tokens.length;
    return super.run(jobs);
  }

  /** Floats of every snapshot read, in order. */
  readonly reads: number[] = [];

  override async readState(slot: number, opts?: { fixedOnly?: boolean }): Promise<Float32Array> {
    const rows = opts?.fixedOnly ? 0 : this.rows[slot];
    const fixed = await super.readState(slot);
    this.reads.push(this.stateSize + rows * ROW_FLOATS);
    const out = new Float32Array(this.stateSize + rows * ROW_FLOATS);
    out.set(fixed);
    return out;
  }

  override writeState(slot: number, state: Float32Array): void {
    const rows = (state.length - this.stateSize) / ROW_FLOATS;
    if (!Number.isInteger(rows) || rows < 0 || rows > this.maxStateRows) throw new RangeError(`state of ${state.length} floats`);
    super.writeState(slot, state.subarray(0, this.stateSize));
    this.rows[slot] = rows;
  }

  override resetState(slot: number): void {
    super.resetState(slot);
    this.rows[slot] = 0;
  }

  override copyState(from: number, to: number): void {
    super.copyState(from, to);
    this.rows[to] = this.rows[from];
  }

  stateBytes(slot: number): number {
    return 4 * (this.stateSize + this.rows[slot] * ROW_FLOATS);
  }
}
