/// <reference types="@webgpu/types" />
// Times a span of GPU work encoded into one command buffer.
//
// With 'timestamp-query' the span is bracketed by two empty compute passes: the first writes a
// timestamp at its beginning, the second at its end, so the figure is GPU time from before the
// first command of the span to after the last (copies have no timestampWrites of their own).
// Without it, the host clock runs from submit to onSubmittedWorkDone, which adds submission
// and completion latency: callers make spans long (tens of milliseconds) so that stays small.
// Dawn quantizes timestamps to 65.536 µs by default (a browser timing-attack guard);
// acquireBenchGpu turns that off with the Dawn flag disable-dawn-features=timestamp_quantization.

export type TimingMethod = 'timestamp-query' | 'wall-clock';

export class GpuSpanTimer {
  readonly method: TimingMethod;
  private readonly querySet?: GPUQuerySet;
  private readonly resolveBuffer?: GPUBuffer;
  private readonly readbackBuffer?: GPUBuffer;

  constructor(
    private readonly device: GPUDevice,
    preferred: TimingMethod = 'timestamp-query',
  ) {
    this.method = preferred === 'timestamp-query' && device.features.has('timestamp-query') ? 'timestamp-query' : 'wall-clock';
    if (this.method === 'timestamp-query') {
      this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 });
      this.resolveBuffer = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
      this.readbackBuffer = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    }
  }

  /** Seconds the GPU spent on the commands `encode` records (this timer's method). */
  async time(encode: (encoder: GPUCommandEncoder) => void): Promise<number> {
    return this.method === 'timestamp-query' ? this.timeWithTimestamps(encode) : timeWithWallClock(this.device, encode);
  }

  dispose(): void {
    this.querySet?.destroy();
    this.resolveBuffer?.destroy();
    this.readbackBuffer?.destroy();
  }

  private async timeWithTimestamps(encode: (encoder: GPUCommandEncoder) => void): Promise<number> {
    const querySet = this.querySet!;
    const encoder = this.device.createCommandEncoder();
    encoder.beginComputePass({ timestampWrites: { querySet, beginningOfPassWriteIndex: 0 } }).end();
    encode(encoder);
    encoder.beginComputePass({ timestampWrites: { querySet, endOfPassWriteIndex: 1 } }).end();
    encoder.resolveQuerySet(querySet, 0, 2, this.resolveBuffer!, 0);
    encoder.copyBufferToBuffer(this.resolveBuffer!, 0, this.readbackBuffer!, 0, 16);
    this.device.queue.submit([encoder.finish()]);
    await this.readbackBuffer!.mapAsync(GPUMapMode.READ);
    const [begin, end] = new BigUint64Array(this.readbackBuffer!.getMappedRange().slice(0));
    this.readbackBuffer!.unmap();
    if (end < begin) {
      throw new Error(`timestamp query gave a negative span (${begin} → ${end} ns); time with 'wall-clock' instead`);
    }
    return Number(end - begin) / 1e9;
  }
}

/** Host time from submitting `encode`'s commands to the queue reporting them done, in seconds. */
export async function timeWithWallClock(device: GPUDevice, encode: (encoder: GPUCommandEncoder) => void): Promise<number> {
  const encoder = device.createCommandEncoder();
  encode(encoder);
  const commands = encoder.finish();
  await device.queue.onSubmittedWorkDone(); // start from an idle queue
  const start = process.hrtime.bigint();
  device.queue.submit([commands]);
  await device.queue.onSubmittedWorkDone();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * How many repetitions of a unit of work make one span last about `targetSeconds`: times
 * growing spans (×4 each time) until one lasts an eighth of the target, then scales up.
 * `encode(n)` must record n repetitions. Result within [1, maxReps].
 */
export async function calibrateRepetitions(
  timer: GpuSpanTimer,
  encode: (reps: number) => (encoder: GPUCommandEncoder) => void,
  targetSeconds: number,
  maxReps = 10_000,
): Promise<number> {
  for (let reps = 1; ; reps *= 4) {
    const seconds = await timer.time(encode(reps));
    if (seconds >= targetSeconds / 8 || reps * 4 > maxReps) {
      return seconds > 0 ? Math.max(1, Math.min(maxReps, Math.ceil((reps * targetSeconds) / seconds))) : maxReps;
    }
  }
}
