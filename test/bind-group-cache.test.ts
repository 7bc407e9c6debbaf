// The runtimes' bind-group cache (engine/gpu/bind-group-cache.ts): one group per use site, and never a group made for
// a kernel of other bindings. The tiled and the split reductions shared a name, so a use site that ran both (a
// product at 32 rows, then at 64) got the wrong group and the H200 refused the step.
import { strict as assert } from 'node:assert';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { BindGroupCache } from '../engine/gpu/bind-group-cache';
import { createBuffer, type Kernel } from '../engine/gpu/kernel';

describe('bind-group cache', () => {
  let gpu: GpuContext;
  before(async () => {
    gpu = await acquireGpu();
  });

  /** A kernel's layout alone (the cache never touches the pipeline); both are named like the two reductions were. */
  function kernel(bindings: ('read' | 'rw')[]): Kernel {
    const layout = gpu.device.createBindGroupLayout({
      entries: bindings.map((kind, binding) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type: kind === 'read' ? 'read-only-storage' : 'storage' } })),
    });
    return { name: 'mm_split_reduce(SPLIT=8)', pipeline: undefined as unknown as GPUComputePipeline, layout, bindings };
  }

  it('returns the same group for a use site, and refuses it to a kernel of other bindings under the same key', () => {
    const cache = new BindGroupCache(gpu.device);
    const buf = createBuffer(gpu.device, 'a', 16, GPUBufferUsage.STORAGE);
    const one = kernel(['rw']);
    const two = kernel(['rw', 'read']);
    const g = cache.get('site', one, [buf]);
    assert.equal(cache.get('site', one, [buf]), g);
    assert.throws(() => cache.get('site', two, [buf, buf]), /bind group 'site' was made for .* \(rw\), not .* \(rw, read\)/);
    cache.delete('site');
    assert.notEqual(cache.get('site', two, [buf, buf]), g);
  });
});
