// Output 'top' of one logits row through the kernels (kernels.ts `softmaxStats` and `topEntries`): the largest
// value, the count of candidates, the softmax sum and the best entries. Every decode step needs them: Math.exp over
// a 65,536-token row cost 1.2-1.5 ms of it, and the JavaScript heap that picked the best 256 another ~0.5 ms
// (top-logits-cpu.ts keeps it as the reference). The compute thread reduces its rows where the head wrote them
// (cpu-forward-base.ts), so a 'top' step sends back ~2 KB instead of a fresh 256 KB buffer (whose allocation
// page-faulted: ~0.2 ms a step).

import type { CpuKernels } from './wasm-kernels';

export interface RowStats {
  max: number;
  finite: number;
  sum: number;
}

/** A row's statistics and its best entries, best first (ties by lower row). */
export interface RowReduction extends RowStats {
  rows: Int32Array;
  logits: Float32Array;
}

/** Bytes of scratch reduceRow needs for `capacity` entries: the statistics (16), then values and rows. */
export function topScratchBytes(capacity: number): number {
  return 16 + 8 * capacity;
}

/**
 * The statistics and the `capacity` best entries (all candidates when fewer) of the n floats at byte `row` of the
 * kernels' memory `buffer`, using topScratchBytes(capacity) bytes at `scratch` (16-byte aligned).
 */
export function reduceRow(k: CpuKernels, buffer: ArrayBufferLike, row: number, n: number, capacity: number, scratch: number): RowReduction {
  k.softmaxStats(row, n, scratch);
  const max = new Float32Array(buffer, scratch, 1)[0];
  const finite = new Int32Array(buffer, scratch + 4, 1)[0];
  const sum = new Float64Array(buffer, scratch + 8, 1)[0];
  const hv = scratch + 16;
  const hr = hv + capacity * 4;
  const size = k.topEntries(row, n, Math.min(capacity, finite), hv, hr);
  return { max, finite, sum, rows: Int32Array.from(new Int32Array(buffer, hr, size)), logits: Float32Array.from(new Float32Array(buffer, hv, size)) };
}
