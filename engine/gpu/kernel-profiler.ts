// Per-kernel GPU time of a forward pass, for benchmarks: while a profiler is attached, the runtime encodes every
// dispatch in a compute pass of its own whose timestampWrites bracket it, and the times are summed by label
// ("matmul:vec:ffnK", "wkv", ...). One pass per dispatch adds a barrier each, so a profiled step is slower
// than a normal one: the shares are what count, and the bench prints the unprofiled step beside them.

/** GPU time per label, summed over the profiled steps. */
export interface KernelTimes {
  /** label → [total µs, dispatches] */
  byLabel: Map<string, [number, number]>;
  totalMicros: number;
  steps: number;
}

export class KernelProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private readonly readback: GPUBuffer;
  private labels: string[] = [];
  private readonly times: KernelTimes = { byLabel: new Map(), totalMicros: 0, steps: 0 };

  /** `capacity`: most dispatches one step encodes (each takes two timestamps). */
  constructor(
    private readonly device: GPUDevice,
    private readonly capacity = 2048,
  ) {
    if (!device.features.has('timestamp-query')) throw new Error("kernel profiling needs the 'timestamp-query' feature, which this device lacks");
    this.querySet = device.createQuerySet({ type: 'timestamp', count: capacity * 2 });
    this.resolveBuffer = device.createBuffer({ size: capacity * 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    this.readback = device.createBuffer({ size: capacity * 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  }

  /** The timestampWrites of the next dispatch's own pass, or undefined once the step's capacity is used. */
  passFor(label: string): GPUComputePassTimestampWrites | undefined {
    const i = this.labels.length;
    if (i >= this.capacity) return undefined;
    this.labels.push(label);
    return { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** After the step's commands are submitted: reads its timestamps and adds them to the totals. */
  async collect(): Promise<void> {
    const n = this.labels.length;
    if (n === 0) return;
    const enc = this.device.createCommandEncoder();
    enc.resolveQuerySet(this.querySet, 0, 2 * n, this.resolveBuffer, 0);
    enc.copyBufferToBuffer(this.resolveBuffer, 0, this.readback, 0, n * 16);
    this.device.queue.submit([enc.finish()]);
    await this.readback.mapAsync(GPUMapMode.READ, 0, n * 16);
    const ts = new BigUint64Array(this.readback.getMappedRange(0, n * 16).slice(0));
    this.readback.unmap();
    for (let i = 0; i < n; i++) {
      const us = ts[2 * i + 1] >= ts[2 * i] ? Number(ts[2 * i + 1] - ts[2 * i]) / 1000 : 0;
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
    this.querySet.destroy();
    this.resolveBuffer.destroy();
    this.readback.destroy();
  }
}
