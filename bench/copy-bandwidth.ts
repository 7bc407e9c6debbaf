/// <reference types="@webgpu/types" />
// Device-to-device copy bandwidth (copyBufferToBuffer): the memory-bandwidth ceiling that
// memory-bound kernels are compared against. Bytes are counted as read + written (2 × size per
// copy), the same convention as device-to-device copy figures elsewhere (METHOD.md).
//
//   node dist/bench/copy-bandwidth.js [--bytes N]
// prints the adapter facts and the bandwidth as JSON.

import { acquireBenchGpu } from './device/acquire-gpu';
import { progress } from './device/progress';
import { fillRandom } from './device/random-fill';
import { GpuSpanTimer, TimingMethod, calibrateRepetitions, median, timeWithWallClock } from './device/gpu-span-timer';

export interface CopyBandwidth {
  /** GB/s (1e9 bytes), counting bytes read + bytes written. */
  gbPerS: number;
  counted: 'read+write';
  method: TimingMethod;
  /** Same copies timed by the host clock (submit → onSubmittedWorkDone), for cross-checking. */
  wallClockGbPerS: number;
  bytesPerCopy: number;
  copiesPerSpan: number;
  spans: number;
  /** Median GPU seconds of one copy. */
  secondsPerCopy: number;
}

const DEFAULT_BYTES = 1 << 30;
const TARGET_SPAN_SECONDS = 0.05;
const SPANS = 5;
const CHECK_BYTES = 4096;

/**
 * Copies a `bytes`-sized buffer of random data to another, warm-up first, then the median of
 * several timed spans of many copies. Default size: 1 GiB, or the device's maxBufferSize if
 * smaller. The first and last 4 KiB of the destination are checked against the source.
 */
export async function measureCopyBandwidth(device: GPUDevice, bytes?: number): Promise<CopyBandwidth> {
  const size = bytes ?? Math.min(DEFAULT_BYTES, floorTo4(device.limits.maxBufferSize));
  if (!Number.isSafeInteger(size) || size <= 0 || size % 4 !== 0) {
    throw new Error(`copy size must be a positive whole number of bytes divisible by 4, got ${bytes}`);
  }
  if (size > device.limits.maxBufferSize) {
    throw new Error(`copy size ${size} exceeds this device's maxBufferSize ${device.limits.maxBufferSize}`);
  }
  if (size < 2 * CHECK_BYTES) {
    throw new Error(`copy size ${size} is too small to measure bandwidth; use at least ${2 * CHECK_BYTES} bytes`);
  }

  progress(`copy: filling ${size} bytes with random data`);
  // Random data, not zeros: zeros can take faster paths than real data (METHOD.md).
  const source = device.createBuffer({ size, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true });
  const mapped = new Uint8Array(source.getMappedRange());
  const expectedHead = new Uint8Array(CHECK_BYTES);
  const expectedTail = new Uint8Array(CHECK_BYTES);
  fillRandom(mapped, (chunk, offset) => {
    copyOverlap(chunk, offset, expectedHead, 0);
    copyOverlap(chunk, offset, expectedTail, size - CHECK_BYTES);
  });
  source.unmap();
  const destination = device.createBuffer({ size, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
  const timer = new GpuSpanTimer(device);
  const encodeCopies = (count: number) => (encoder: GPUCommandEncoder) => {
    for (let i = 0; i < count; i++) encoder.copyBufferToBuffer(source, 0, destination, 0, size);
  };

  try {
    progress('copy: warm-up');
    await timer.time(encodeCopies(3)); // warm-up: first-touch allocation, clocks ramping up
    const copiesPerSpan = await calibrateRepetitions(timer, encodeCopies, TARGET_SPAN_SECONDS);
    progress(`copy: ${SPANS} spans of ${copiesPerSpan} copies (${timer.method})`);
    const perCopy: number[] = [];
    for (let span = 0; span < SPANS; span++) {
      perCopy.push((await timer.time(encodeCopies(copiesPerSpan))) / copiesPerSpan);
    }
    const wallPerCopy = (await timeWithWallClock(device, encodeCopies(copiesPerSpan))) / copiesPerSpan;
    await checkEnds(device, destination, size, expectedHead, expectedTail);

    const secondsPerCopy = median(perCopy);
    return {
      gbPerS: (2 * size) / secondsPerCopy / 1e9,
      counted: 'read+write',
      method: timer.method,
      wallClockGbPerS: (2 * size) / wallPerCopy / 1e9,
      bytesPerCopy: size,
      copiesPerSpan,
      spans: SPANS,
      secondsPerCopy,
    };
  } finally {
    timer.dispose();
    source.destroy();
    destination.destroy();
  }
}

async function checkEnds(device: GPUDevice, buffer: GPUBuffer, size: number, head: Uint8Array, tail: Uint8Array): Promise<void> {
  const readback = device.createBuffer({ size: 2 * CHECK_BYTES, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, readback, 0, CHECK_BYTES);
  encoder.copyBufferToBuffer(buffer, size - CHECK_BYTES, readback, CHECK_BYTES, CHECK_BYTES);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const got = new Uint8Array(readback.getMappedRange().slice(0));
  readback.destroy();
  if (!bytesEqual(got.subarray(0, CHECK_BYTES), head) || !bytesEqual(got.subarray(CHECK_BYTES), tail)) {
    throw new Error('copyBufferToBuffer produced wrong data: the bandwidth figure would be meaningless');
  }
}

/** Copies the part of `chunk` (at `chunkOffset` in the whole) that overlaps `window` (at `windowOffset`). */
function copyOverlap(chunk: Uint8Array, chunkOffset: number, window: Uint8Array, windowOffset: number): void {
  const start = Math.max(chunkOffset, windowOffset);
  const end = Math.min(chunkOffset + chunk.length, windowOffset + window.length);
  if (start < end) window.set(chunk.subarray(start - chunkOffset, end - chunkOffset), start - windowOffset);
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}

function floorTo4(n: number): number {
  return n - (n % 4);
}

/** Parses `--bytes N` (N may use a K/M/G binary suffix); undefined when absent. */
export function parseBytesArgument(argv: readonly string[]): number | undefined {
  const index = argv.indexOf('--bytes');
  if (index < 0) return undefined;
  const text = argv[index + 1];
  const match = /^(\d+)([KMG]?)$/i.exec(text ?? '');
  if (!match) throw new Error(`--bytes needs a size such as 268435456 or 256M, got ${text ?? 'nothing'}`);
  const scale = { '': 1, K: 1 << 10, M: 1 << 20, G: 1 << 30 }[match[2].toUpperCase() as '' | 'K' | 'M' | 'G'];
  return Number(match[1]) * scale;
}

async function main(): Promise<void> {
  const bytes = parseBytesArgument(process.argv.slice(2));
  const gpu = await acquireBenchGpu();
  try {
    const copy = await measureCopyBandwidth(gpu.device, bytes);
    console.log(JSON.stringify({ adapter: gpu.facts, copy }, null, 2));
  } finally {
    gpu.release();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
