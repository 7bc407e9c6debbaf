// The compute thread's row reduction (engine/cpu/row-stats.ts reduceRow) for a row in host memory, for the tests
// that hold it against the JavaScript reference: the row is copied into a small kernel memory of this instance's own.

import { reduceRow, topScratchBytes, type RowReduction, type RowStats } from '../engine/cpu/row-stats';
import { instantiateKernels, type CpuKernels } from '../engine/cpu/wasm-kernels';

const PAGE = 65536;

export class RowStatsKernel {
  private memory: WebAssembly.Memory | null = null;
  private kernels: CpuKernels | null = null;
  private pages = 0;

  reduce(row: Float32Array, capacity: number): RowReduction {
    const scratch = 0;
    const at = Math.ceil(topScratchBytes(capacity) / 64) * 64;
    const bytes = at + row.length * 4;
    if (!this.memory || bytes > this.pages * PAGE) {
      this.pages = Math.ceil(bytes / PAGE);
      this.memory = new WebAssembly.Memory({ initial: this.pages, maximum: this.pages, shared: true });
      this.kernels = instantiateKernels(this.memory);
    }
    new Float32Array(this.memory.buffer, at, row.length).set(row);
    return reduceRow(this.kernels!, this.memory.buffer, at, row.length, capacity, scratch);
  }

  stats(row: Float32Array): RowStats {
    const { max, finite, sum } = this.reduce(row, 0);
    return { max, finite, sum };
  }
}
