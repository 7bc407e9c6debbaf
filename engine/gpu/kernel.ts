import { shaderSource, type ShaderConstant } from './shader-source';
import { emulateSubgroupMatrices, isEmulating } from './subgroup-matrix-emulation';

/** How a kernel sees each binding of its group 0, in binding order. */
export type BindingKind = 'uniform' | 'read' | 'rw';

export interface Kernel {
  name: string;
  pipeline: GPUComputePipeline;
  layout: GPUBindGroupLayout;
  /** The layout's bindings: a bind group made for one kernel serves another only where these agree. */
  bindings: readonly BindingKind[];
}

/** A compute pipeline with an explicit layout, so one bind group serves every variant of a kernel. */
export function makeKernel(
  device: GPUDevice,
  parts: string[],
  constants: Record<string, ShaderConstant>,
  bindings: BindingKind[],
): Kernel {
  // Generated code (string constants) follows from the numeric ones, so the name leaves it out.
  const name = `${parts[parts.length - 1]}(${Object.entries(constants)
    .filter(([, v]) => typeof v !== 'string')
    .map(([k, v]) => `${k}=${v}`)
    .join(',')})`;
  // Checked here, where it can be named: past the limit Dawn makes an invalid pipeline, and the step that uses it
  // fails with an uncaptured error that breaks the device (RWKV-7b's attention rows bind 9 storage buffers, and
  // WebGPU's default limit is 8: Dawn's null backend has it, test/subgroup-matrix-shaders.test.ts).
  const storage = bindings.filter((b) => b !== 'uniform').length;
  const allowed = device.limits.maxStorageBuffersPerShaderStage;
  if (storage > allowed) {
    throw new Error(`kernel ${name} binds ${storage} storage buffers, more than this GPU allows in a shader stage (${allowed}); run this model on the CPU backend (device: 'cpu')`);
  }
  const layout = device.createBindGroupLayout({
    label: name,
    entries: bindings.map((kind, binding) => ({
      binding,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: kind === 'uniform' ? 'uniform' : kind === 'read' ? 'read-only-storage' : 'storage' },
    })),
  });
  const source = shaderSource(parts, constants);
  const code = isEmulating(device) ? emulateSubgroupMatrices(source) : source;
  const module = device.createShaderModule({ label: name, code });
  const pipeline = device.createComputePipeline({
    label: name,
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module, entryPoint: 'main' },
  });
  return { name, pipeline, layout, bindings };
}

/** A buffer range to bind; a bare buffer binds whole. */
export type BufferRange = GPUBuffer | { buffer: GPUBuffer; offset: number; size: number };

export function bindGroup(device: GPUDevice, kernel: Kernel, resources: BufferRange[]): GPUBindGroup {
  return device.createBindGroup({
    label: kernel.name,
    layout: kernel.layout,
    entries: resources.map((r, binding) => ({
      binding,
      resource: 'buffer' in r ? { buffer: r.buffer, offset: r.offset, size: r.size } : { buffer: r },
    })),
  });
}

export function createBuffer(device: GPUDevice, label: string, bytes: number, usage: number): GPUBuffer {
  // Storage bindings must be a multiple of 4 bytes and non-zero.
  return device.createBuffer({ label, size: Math.max(16, Math.ceil(bytes / 16) * 16), usage });
}

export function uploadBuffer(device: GPUDevice, label: string, data: ArrayBufferView, usage: number): GPUBuffer {
  const buf = createBuffer(device, label, data.byteLength, usage | GPUBufferUsage.COPY_DST);
  device.queue.writeBuffer(buf, 0, data.buffer, data.byteOffset, data.byteLength);
  return buf;
}
