// GPU time of whole forward passes with chosen kernels left out, for benchmarks: while attached, the runtime
// encodes each sub-pass as it normally does (one pass between submits, barriers and all) bracketed by two
// timestamps, and skips the dispatches whose label matches `skip`. A kernel class's cost inside the dependent chain of a
// step is then the span with it minus the span without it. The per-dispatch profiler (kernel-profiler.ts) puts
// every dispatch in a pass of its own, which on the H200 made a 3.4 ms batch-1 step sum to 6 ms; spans do not
// change how the step is encoded. Skipping kernels leaves the outputs meaningless, never the timing: no kernel
// branches on the values it reads.

export class StepSpan {
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private readonly readback: GPUBuffer;
  private used = 0;
  private micros = 0;
  private passes = 0;

  /** `capacity`: most sub-passes one step encodes before collect(). */
  constructor(
    private readonly device: GPUDevice,
    readonly skip: RegExp | null = null,
    private readonly capacity = 64,
  ) {
    if (!device.features.has('timestamp-query')) throw new Error("step spans need the 'timestamp-query' feature, which this device lacks");
    this.querySet = device.createQuerySet({ type: 'timestamp', count: capacity * 2 });
    this.resolveBuffer = device.createBuffer({ size: capacity * 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    this.readback = device.createBuffer({ size: capacity * 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  }

  /** Whether the dispatch called `label` runs. */
  keeps(label: string): boolean {
    return !this.skip || !this.skip.test(label);
  }

  /** Where the next sub-pass writes its begin and end timestamps, or undefined once the capacity is used. */
  nextPass(): { querySet: GPUQuerySet; beginningOfPassWriteIndex: number; endOfPassWriteIndex: number } | undefined {
    if (this.used >= this.capacity) return undefined;
    const i = this.used++;
    return { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** After a step's commands are submitted: adds its passes' spans to the total. */
  async collect(): Promise<void> {
    const n = this.used;
    if (n === 0) return;
    const enc = this.device.createCommandEncoder();
    enc.resolveQuerySet(this.querySet, 0, 2 * n, this.resolveBuffer, 0);
    enc.copyBufferToBuffer(this.resolveBuffer, 0, this.readback, 0, n * 16);
    this.device.queue.submit([enc.finish()]);
    await this.readback.mapAsync(GPUMapMode.READ, 0, n * 16);
    const ts = new BigUint64Array(this.readback.getMappedRange(0, n * 16).slice(0));
    this.readback.unmap();
    for (let i = 0; i < n; i++) if (ts[2 * i + 1] >= ts[2 * i]) this.micros += Number(ts[2 * i + 1] - ts[2 * i]) / 1000;
    this.passes++;
    this.used = 0;
  }

  /** Mean GPU µs per collected step. */
  microsPerStep(): number {
    return this.micros / Math.max(1, this.passes);
  }

  dispose(): void {
    this.querySet.destroy();
    this.resolveBuffer.destroy();
    this.readback.destroy();
  }
}
