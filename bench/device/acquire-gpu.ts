/// <reference types="@webgpu/types" />
// Acquires a WebGPU device for benchmarks straight from the `webgpu` package (Dawn), without
// the engine, so device measurements do not depend on engine code. Asks for the adapter's
// largest buffer limits and the optional features the engine can use.

/** Features requested when the adapter has them. */
export const BENCH_OPTIONAL_FEATURES: readonly GPUFeatureName[] = ['subgroups', 'timestamp-query', 'shader-f16'];

/** Limits printed in the device facts: the ones that shape kernels and buffer layouts. */
export const KEY_LIMITS = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxUniformBufferBindingSize',
  'maxStorageBuffersPerShaderStage',
  'maxBindGroups',
  'maxBindingsPerBindGroup',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'minStorageBufferOffsetAlignment',
  'minUniformBufferOffsetAlignment',
] as const;

export interface AdapterFacts {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
  isFallbackAdapter?: boolean;
  adapterFeatures: string[];
  deviceFeatures: string[];
  /** The device's limits (as granted) for KEY_LIMITS. */
  limits: Record<string, number>;
  /** The adapter's limits for KEY_LIMITS: what a device could ask for. */
  adapterLimits: Record<string, number>;
  /** Flags the Dawn instance was created with. */
  dawnFlags?: string[];
}

/**
 * Flags for Dawn's instance. Timestamp quantization (on by default: 65.536 µs steps, a browser
 * timing-attack guard) would blur single-kernel timings, so benchmarks turn it off.
 */
export const BENCH_DAWN_FLAGS: readonly string[] = ['disable-dawn-features=timestamp_quantization'];

export interface BenchGpu {
  gpu: GPU;
  adapter: GPUAdapter;
  device: GPUDevice;
  facts: AdapterFacts;
  /** Destroys the device and drops the Dawn instance so the process can exit. */
  release(): void;
}

// Dawn's instance pumps the callbacks (mapAsync, onSubmittedWorkDone). If it is collected
// while a device is in use, pending promises never settle and the process exits or aborts,
// so every instance stays referenced here until released.
const liveInstances = new Set<GPU>();

export async function acquireBenchGpu(dawnFlags: readonly string[] = BENCH_DAWN_FLAGS): Promise<BenchGpu> {
  // `webgpu` is ESM-only; this file compiles to CommonJS, where import() still loads ESM.
  const { create, globals } = await import('webgpu');
  // Puts GPUBufferUsage, GPUMapMode, GPUShaderStage… on globalThis, as in a browser.
  Object.assign(globalThis, globals);
  const gpu = create([...dawnFlags]);
  liveInstances.add(gpu);
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) {
    liveInstances.delete(gpu);
    throw new Error(
      'No WebGPU adapter found. On the device machine run through bench/device/remote.sh (Vulkan loader, VK_DRIVER_FILES); ' +
        'here, Mesa lavapipe must be installed.',
    );
  }
  const requiredFeatures = BENCH_OPTIONAL_FEATURES.filter((feature) => adapter.features.has(feature));
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({
      requiredFeatures,
      requiredLimits: {
        maxBufferSize: adapter.limits.maxBufferSize,
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      },
    });
  } catch (error) {
    liveInstances.delete(gpu);
    throw error;
  }
  device.addEventListener('uncapturederror', (event) => {
    console.error(`WebGPU uncaptured error: ${(event as GPUUncapturedErrorEvent).error.message}`);
  });
  const release = () => {
    device.destroy();
    liveInstances.delete(gpu);
  };
  return { gpu, adapter, device, facts: { ...describeAdapter(adapter, device), dawnFlags: [...dawnFlags] }, release };
}

export function describeAdapter(adapter: GPUAdapter, device: GPUDevice): AdapterFacts {
  const info = adapter.info;
  const limits: Record<string, number> = {};
  const adapterLimits: Record<string, number> = {};
  for (const name of KEY_LIMITS) {
    limits[name] = device.limits[name];
    adapterLimits[name] = adapter.limits[name];
  }
  return {
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    subgroupMinSize: info.subgroupMinSize,
    subgroupMaxSize: info.subgroupMaxSize,
    isFallbackAdapter: info.isFallbackAdapter,
    adapterFeatures: [...adapter.features].map(String).sort(),
    deviceFeatures: [...device.features].map(String).sort(),
    limits,
    adapterLimits,
  };
}
