// Test fixture: the process's GPU, acquired before a suite's tests, and the backends a test opens, disposed after
// each test (or after the suite), so a failing test leaves no model on the device for the next.

import { type Backend } from '../engine/backend';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';

export interface GpuBackends {
  /** The GPU (after the suite's `before`). */
  readonly gpu: GpuContext;
  /** Keeps `be` to be disposed, and returns it. */
  open<B extends Backend>(be: B): B;
}

/** Registers the hooks in the calling describe(); `when`: dispose after each test (default) or after the suite. */
export function gpuBackends(when: 'each' | 'all' = 'each'): GpuBackends {
  let gpu: GpuContext | null = null;
  const opened: Backend[] = [];
  before(async () => {
    gpu = await acquireGpu();
  });
  (when === 'each' ? afterEach : after)(() => {
    for (const be of opened.splice(0)) be.dispose();
  });
  return {
    get gpu() {
      if (!gpu) throw new Error('the GPU is acquired in the suite\'s before hook');
      return gpu;
    },
    open(be) {
      opened.push(be);
      return be;
    },
  };
}
