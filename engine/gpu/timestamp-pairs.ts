// Pairs of GPU timestamps (begin, end) for benchmarks, and reading them back as µs spans: what the kernel profiler
// (one pair a dispatch) and step spans (one pair a sub-pass) both need.

export class TimestampPairs {
  readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private readonly readback: GPUBuffer;

  constructor(
    private readonly device: GPUDevice,
    readonly capacity: number,
    what: string,
  ) {
    if (!device.features.has('timestamp-query')) throw new Error(`${what} needs the 'timestamp-query' feature, which this device lacks`);
    this.querySet = device.createQuerySet({ type: 'timestamp', count: capacity * 2 });
    this.resolveBuffer = device.createBuffer({ size: capacity * 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    this.readback = device.createBuffer({ size: capacity * 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  }

  /** The timestampWrites of pair i. */
  writes(i: number): { querySet: GPUQuerySet; beginningOfPassWriteIndex: number; endOfPassWriteIndex: number } {
    return { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** After the commands that wrote them are submitted: pairs 0..n-1 as µs (0 where the clock went backwards). */
  async spans(n: number): Promise<number[]> {
    if (n === 0) return [];
    const enc = this.device.createCommandEncoder();
    enc.resolveQuerySet(this.querySet, 0, 2 * n, this.resolveBuffer, 0);
    enc.copyBufferToBuffer(this.resolveBuffer, 0, this.readback, 0, n * 16);
    this.device.queue.submit([enc.finish()]);
    await this.readback.mapAsync(GPUMapMode.READ, 0, n * 16);
    const ts = new BigUint64Array(this.readback.getMappedRange(0, n * 16).slice(0));
    this.readback.unmap();
    return Array.from({ length: n }, (_, i) => (ts[2 * i + 1] >= ts[2 * i] ? Number(ts[2 * i + 1] - ts[2 * i]) / 1000 : 0));
  }

  dispose(): void {
    this.querySet.destroy();
    this.resolveBuffer.destroy();
    this.readback.destroy();
  }
}
