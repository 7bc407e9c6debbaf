// WebGPU device acquisition through Dawn (npm `webgpu`). The package is ESM-only, so it is loaded with a
// dynamic import that TypeScript keeps as-is in CommonJS output.

export interface GpuContext {
  device: GPUDevice;
  adapterName: string;
  features: Set<string>;
  /** Set once the device is lost; every later use must fail with this message. */
  lostReason: string | null;
  /** Subgroups exist and are exactly 32 lanes (NVIDIA): matrix kernels then reduce rows with subgroupAdd. */
  subgroup32: boolean;
  /** First uncaptured WebGPU error (a validation error is an engine bug): reported by the next call. */
  error: string | null;
}

export class GpuUnavailableError extends Error {}

const NO_ADAPTER_HELP =
  'No WebGPU adapter found. rwkv-flow needs a Vulkan (Linux), Metal (macOS) or D3D12 (Windows) GPU driver. ' +
  'On a Linux machine without a GPU, install Mesa lavapipe >= 24 (Debian bookworm: add the bookworm-backports ' +
  'suite, then `apt-get install -t bookworm-backports mesa-vulkan-drivers libvulkan1`).';

let dawnModule: Promise<{ create: (o: string[]) => GPU; globals: object }> | null = null;

async function loadDawn() {
  if (!dawnModule) {
    // Function constructor keeps `import()` out of TypeScript's CommonJS rewrite.
    const dynImport = new Function('m', 'return import(m)') as (m: string) => Promise<any>;
    dawnModule = dynImport('webgpu').then((m) => {
      // GPUBufferUsage, GPUMapMode etc. live in `globals`; shaders and buffers need them as globals.
      for (const [k, v] of Object.entries(m.globals)) {
        if (!(k in globalThis)) (globalThis as any)[k] = v;
      }
      return m;
    });
  }
  return dawnModule;
}

let gpuInstance: GPU | null = null;

export interface DeviceRequest {
  /** Bytes the largest single storage buffer binding must hold. */
  maxBindingBytes?: number;
  /** Total bytes of the largest buffer. */
  maxBufferBytes?: number;
}

export async function acquireGpu(req: DeviceRequest = {}): Promise<GpuContext> {
  const dawn = await loadDawn();
  if (!gpuInstance) gpuInstance = dawn.create([]);
  const adapter = await gpuInstance.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new GpuUnavailableError(NO_ADAPTER_HELP);
  const lim = adapter.limits;
  const needBinding = req.maxBindingBytes ?? 0;
  if (needBinding > lim.maxStorageBufferBindingSize) {
    throw new GpuUnavailableError(
      `The model needs storage bindings of ${needBinding} bytes but adapter allows ${lim.maxStorageBufferBindingSize}.`,
    );
  }
  const wanted: GPUFeatureName[] = ['subgroups', 'timestamp-query', 'shader-f16'] as GPUFeatureName[];
  const features = wanted.filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({
    requiredFeatures: features,
    requiredLimits: {
      maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
      maxBufferSize: lim.maxBufferSize,
      maxStorageBuffersPerShaderStage: Math.min(lim.maxStorageBuffersPerShaderStage, 10),
      maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: lim.maxComputeWorkgroupSizeX,
    },
  });
  const info = adapter.info;
  const adapterName =
    [info.vendor, info.architecture, info.device, info.description].filter((s) => s && s.length).join(' ') ||
    'unknown adapter';
    const sg = info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
  const subgroup32 = features.includes('subgroups' as GPUFeatureName) && sg.subgroupMinSize === 32 && sg.subgroupMaxSize === 32;
  const ctx: GpuContext = { device, adapterName, features: new Set(features), subgroup32, lostReason: null, error: null };
  device.lost.then((l) => {
    ctx.lostReason = `GPU device lost (${l.reason}): ${l.message}`;
  });
  device.onuncapturederror = (e) => {
    // Validation errors mean a bug in the engine; surface them loudly instead of silently producing zeros.
    const msg = `WebGPU error: ${(e as GPUUncapturedErrorEvent).error.message}`;
    ctx.error ??= msg;
    console.error(`[rwkv-flow] ${msg}`);
  };
  return ctx;
}
