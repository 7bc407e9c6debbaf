// Output 'top' of one logits row on the host thread, through the kernels (kernels.ts `softmaxStats` and
// `topEntries`): the largest value, the count of candidates, the softmax sum and the best entries. Every decode
// step needs them: Math.exp over a 65,536-token row cost 1.2-1.5 ms of it, and the JavaScript heap that picked
// the best 256 another ~0.5 ms (top-logits-cpu.ts keeps it as the reference). The row is copied into a small
// memory of this instance's own (the kernels' memory is the compute thread's; the logits arrive as a copy anyway).

import { instantiateKernels, type CpuKernels } from './wasm-kernels';

const PAGE = 65536;
/** Where the results go and where the row starts (bytes). */
const OUT = 0;
const ROW = 64;

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

export class RowStatsKernel {
  private memory: WebAssembly.Memory | null = null;
  private kernels: CpuKernels | null = null;
  private pages = 0;

  /** Copies the row in (growing the memory when it is short of `extra` bytes past it); returns the kernels. */
  private load(row: Float32Array, extra: number): CpuKernels {
    const bytes = ROW + row.length * 4 + extra;
    if (!this.memory || bytes > this.pages * PAGE) {
      this.pages = Math.ceil(bytes / PAGE);
      this.memory = new WebAssembly.Memory({ initial: this.pages, maximum: this.pages, shared: true });
      this.kernels = instantiateKernels(this.memory);
    }
    new Float32Array(this.memory.buffer, ROW, row.length).set(row);
    return this.kernels!;
  }

  private readStats(): RowStats {
    const buf = this.memory!.buffer;
    return { max: new Float32Array(buf, OUT, 1)[0], finite: new Int32Array(buf, OUT + 4, 1)[0], sum: new Float64Array(buf, OUT + 8, 1)[0] };
  }

  stats(row: Float32Array): RowStats {
    this.load(row, 0).softmaxStats(ROW, row.length, OUT);
    return this.readStats();
  }

  /** The statistics and the `capacity` best entries (all candidates when fewer) of the row. */
  reduce(row: Float32Array, capacity: number): RowReduction {
    const hv = ROW + Math.ceil(row.length / 4) * 16;
    const hr = hv + capacity * 4;
    const k = this.load(row, (hr - ROW - row.length * 4) + capacity * 4);
    k.softmaxStats(ROW, row.length, OUT);
    const stats = this.readStats();
    const size = k.topEntries(ROW, row.length, Math.min(capacity, stats.finite), hv, hr);
    const buf = this.memory!.buffer;
    return { ...stats, rows: new Int32Array(buf.slice(hr, hr + size * 4)), logits: new Float32Array(buf.slice(hv, hv + size * 4)) };
  }
}
