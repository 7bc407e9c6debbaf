// Per-kernel GPU time of a forward pass, for benchmarks: while a profiler is attached, the runtime encodes every
// dispatch in a compute pass of its own whose timestampWrites bracket it, and the times are summed by label
// ("matmul:vec:ffnK", "wkv", ...). One pass per dispatch adds a barrier each, so a profiled step is slower
// than a normal one: the shares are what count, and the bench prints the unprofiled step beside them.

import { TimestampPairs } from './timestamp-pairs';

/** GPU time per label, summed over the profiled steps. */
export interface KernelTimes {
  /** label → [total µs, dispatches] */
  byLabel: Map<string, [number, number]>;
  totalMicros: number;
  steps: number;
}

export class KernelProfiler {
  private readonly pairs: TimestampPairs;
  private labels: string[] = [];
  private readonly times: KernelTimes = { byLabel: new Map(), totalMicros: 0, steps: 0 };

  /**
   * `capacity`: most dispatches one step encodes (each takes two timestamps). `repeat`: times the runtime
   * dispatches each kernel in its pass (Rwkv7Runtime.encodeProfiled); its spans are divided by it.
   */
  constructor(device: GPUDevice, capacity = 2048, readonly repeat = 1) {
    if (!(Number.isInteger(repeat) && repeat >= 1 && repeat <= 64)) throw new RangeError(`profiler repeat ${repeat}: give a whole number from 1 to 64`);
    this.pairs = new TimestampPairs(device, capacity, 'kernel profiling');
  }

  /** The timestampWrites of the next dispatch's own pass, or undefined once the step's capacity is used. */
  passFor(label: string): GPUComputePassTimestampWrites | undefined {
    const i = this.labels.length;
    if (i >= this.pairs.capacity) return undefined;
    this.labels.push(label);
    return this.pairs.writes(i);
  }

  /** After the step's commands are submitted: reads its timestamps and adds them to the totals. */
  async collect(): Promise<void> {
    const n = this.labels.length;
    if (n === 0) return;
    const spans = await this.pairs.spans(n);
    for (let i = 0; i < n; i++) {
      const us = spans[i] / this.repeat;
      const entry = this.times.byLabel.get(this.labels[i]) ?? [0, 0];
      entry[0] += us;
      entry[1] += 1;
      this.times.byLabel.set(this.labels[i], entry);
      this.times.totalMicros += us;
    }
    this.times.steps++;
    this.labels = [];
  }

  /** Totals per step, largest first: label, µs per step, share of the kernels' time, dispatches per step. */
  report(): { label: string; microsPerStep: number; share: number; dispatchesPerStep: number }[] {
    const { byLabel, totalMicros, steps } = this.times;
    return [...byLabel.entries()]
      .map(([label, [us, count]]) => ({
        label,
        microsPerStep: +(us / Math.max(1, steps)).toFixed(1),
        share: +(us / Math.max(1e-9, totalMicros)).toFixed(3),
        dispatchesPerStep: +(count / Math.max(1, steps)).toFixed(1),
      }))
      .sort((a, b) => b.microsPerStep - a.microsPerStep);
  }

  dispose(): void {
    this.pairs.dispose();
  }
}
