// Which backend a model runs on: the WebGPU one on a hardware GPU, the CPU one (WebAssembly SIMD) where the only
// WebGPU adapter is a software rasterizer (Mesa lavapipe/llvmpipe, SwiftShader) or there is none: there the CPU
// backend is many times faster than the same kernels through a software Vulkan driver.

import { acquireGpu, type DeviceRequest, GpuContext, GpuUnavailableError, releaseGpu } from '../gpu/device';

export type DeviceChoice = 'auto' | 'gpu' | 'cpu';

export const DEVICE_CHOICES: readonly DeviceChoice[] = ['auto', 'gpu', 'cpu'];

/** Adapter names of software WebGPU implementations, which run on the CPU. */
export const SOFTWARE_ADAPTER = /llvmpipe|lavapipe|swiftshader|software/i;

export type ChosenDevice = { device: 'gpu'; gpu: GpuContext } | { device: 'cpu'; reason: string };

/**
 * `cpuRuns`: whether the CPU backend runs this model as asked (it runs every version, but not precision 'nf4');
 * when it does not, 'auto' takes any WebGPU adapter, software ones included, and 'cpu' is refused with the reason.
 */
export async function chooseDevice(
  choice: DeviceChoice = 'auto',
  gpu?: GpuContext,
  cpuRuns: { ok: boolean; why?: string } = { ok: true },
  request: DeviceRequest = {},
): Promise<ChosenDevice> {
  if (!DEVICE_CHOICES.includes(choice)) throw new RangeError(`device must be 'auto', 'gpu' or 'cpu', got ${JSON.stringify(choice)}`);
  if (choice === 'cpu') {
    if (!cpuRuns.ok) throw new Error(`device 'cpu': ${cpuRuns.why}`);
    return { device: 'cpu', reason: 'device: cpu' };
  }
  // A device handed in (tests, several models on one GPU) is used as it is.
  if (gpu) return { device: 'gpu', gpu };
  if (choice === 'gpu' || !cpuRuns.ok) return { device: 'gpu', gpu: await acquireGpu(request) };
  let found: GpuContext;
  try {
    found = await acquireGpu(request);
  } catch (e) {
    if (e instanceof GpuUnavailableError) return { device: 'cpu', reason: 'no WebGPU adapter' };
    throw e;
  }
  if (SOFTWARE_ADAPTER.test(found.adapterName)) {
    releaseGpu(found);
    return { device: 'cpu', reason: `only a software GPU adapter (${found.adapterName})` };
  }
  return { device: 'gpu', gpu: found };
}
