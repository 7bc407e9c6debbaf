// Bind groups made once per use site and kept: a recorded sub-pass replays them every step. Each is kept with the
// kernel it was made for, and a kernel of other bindings asking under the same key is refused: a key built from a
// name two kernels shared (the split and the tiled reductions were both "mm_split_reduce(SPLIT=8)") once handed the
// tiled reduction the split one's group, and the H200 refused the whole step.

import { bindGroup, type BufferRange, type Kernel } from './kernel';

export class BindGroupCache {
  private readonly groups = new Map<string, { kernel: Kernel; group: GPUBindGroup }>();

  constructor(private readonly device: GPUDevice) {}

  /** The group of `kernel` at use site `key`, made from `res` the first time. */
  get(key: string, kernel: Kernel, res: BufferRange[]): GPUBindGroup {
    const had = this.groups.get(key);
    if (had) {
      if (had.kernel !== kernel && had.kernel.bindings.join() !== kernel.bindings.join())
        throw new Error(`bind group '${key}' was made for ${had.kernel.name} (${had.kernel.bindings.join(', ')}), not ${kernel.name} (${kernel.bindings.join(', ')})`);
      return had.group;
    }
    const group = bindGroup(this.device, kernel, res);
    this.groups.set(key, { kernel, group });
    return group;
  }

  /** Forgets a use site's group (its buffers were replaced). */
  delete(key: string): void {
    this.groups.delete(key);
  }

  clear(): void {
    this.groups.clear();
  }
}
