// GPU time of whole forward passes with chosen kernels left out, for benchmarks: while attached, the runtime
// encodes each sub-pass as it normally does (one pass between submits, barriers and all) bracketed by two
// timestamps, and skips the dispatches whose label matches `skip`. A kernel class's cost inside the dependent chain of a
// step is then the span with it minus the span without it. The per-dispatch profiler (kernel-profiler.ts) puts
// every dispatch in a pass of its own, which on the H200 made a 3.4 ms batch-1 step sum to 6 ms; spans do not
// change how the step is encoded. Skipping kernels leaves the outputs meaningless, never the timing: no kernel
// branches on the values it reads.

import { TimestampPairs } from './timestamp-pairs';

export class StepSpan {
  private readonly pairs: TimestampPairs;
  private used = 0;
  private micros = 0;
  private passes = 0;

  /** `capacity`: most sub-passes one step encodes before collect(). */
  constructor(
    device: GPUDevice,
    readonly skip: RegExp | null = null,
    capacity = 64,
  ) {
    this.pairs = new TimestampPairs(device, capacity, 'step spans');
  }

  /** Whether the dispatch called `label` runs. */
  keeps(label: string): boolean {
    return !this.skip || !this.skip.test(label);
  }

  /** Where the next sub-pass writes its begin and end timestamps, or undefined once the capacity is used. */
  nextPass(): { querySet: GPUQuerySet; beginningOfPassWriteIndex: number; endOfPassWriteIndex: number } | undefined {
    return this.used < this.pairs.capacity ? this.pairs.writes(this.used++) : undefined;
  }

  /** After a step's commands are submitted: adds its passes' spans to the total. */
  async collect(): Promise<void> {
    if (this.used === 0) return;
    for (const us of await this.pairs.spans(this.used)) this.micros += us;
    this.passes++;
    this.used = 0;
  }

  /** Mean GPU µs per collected step. */
  microsPerStep(): number {
    return this.micros / Math.max(1, this.passes);
  }

  dispose(): void {
    this.pairs.dispose();
  }
}
