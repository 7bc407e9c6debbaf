// The largest value, the count of candidates and the softmax sum of one logits row, on the host thread, through
// the kernels' vector exp (kernels.ts `softmaxStats`): output 'top' needs them every decode step, and Math.exp
// over a 65,536-token row cost 1.2-1.5 ms of it. The row is copied into a small memory of this instance's own
// (the kernels' memory is the compute thread's; the logits arrive as a copy anyway).

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

export class RowStatsKernel {
  private memory: WebAssembly.Memory | null = null;
  private kernels: CpuKernels | null = null;
  private pages = 0;

  stats(row: Float32Array): RowStats {
    const bytes = ROW + row.length * 4;
    if (!this.memory || bytes > this.pages * PAGE) {
      this.pages = Math.ceil(bytes / PAGE);
      this.memory = new WebAssembly.Memory({ initial: this.pages, maximum: this.pages, shared: true });
      this.kernels = instantiateKernels(this.memory);
    }
    const buf = this.memory.buffer;
    new Float32Array(buf, ROW, row.length).set(row);
    this.kernels!.softmaxStats(ROW, row.length, OUT);
    return { max: new Float32Array(buf, OUT, 1)[0], finite: new Int32Array(buf, OUT + 4, 1)[0], sum: new Float64Array(buf, OUT + 8, 1)[0] };
  }
}
