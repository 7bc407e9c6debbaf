// Which backend a model runs on: the WebGPU one on a hardware GPU, the CPU one (WebAssembly SIMD) where the only
// WebGPU adapter is a software rasterizer (Mesa lavapipe/llvmpipe, SwiftShader) or there is none: there the CPU
// backend is many times faster than the same kernels through a software Vulkan driver.

import { acquireGpu, GpuContext, GpuUnavailableError } from '../gpu/device';

export type DeviceChoice = 'auto' | 'gpu' | 'cpu';

export const DEVICE_CHOICES: readonly DeviceChoice[] = ['auto', 'gpu', 'cpu'];

/** Adapter names of software WebGPU implementations, which run on the CPU. */
export const SOFTWARE_ADAPTER = /llvmpipe|lavapipe|swiftshader|software/i;

export type ChosenDevice = { device: 'gpu'; gpu: GpuContext } | { device: 'cpu'; reason: string };

export async function chooseDevice(choice: DeviceChoice = 'auto', gpu?: GpuContext): Promise<ChosenDevice> {
  if (!DEVICE_CHOICES.includes(choice)) throw new RangeError(`device must be 'auto', 'gpu' or 'cpu', got ${JSON.stringify(choice)}`);
  if (choice === 'cpu') return { device: 'cpu', reason: 'device: cpu' };
  // A device handed in (tests, several models on one GPU) is used as it is.
  if (gpu) return { device: 'gpu', gpu };
  if (choice === 'gpu') return { device: 'gpu', gpu: await acquireGpu() };
  let found: GpuContext;
  try {
    found = await acquireGpu();
  } catch (e) {
    if (e instanceof GpuUnavailableError) return { device: 'cpu', reason: 'no WebGPU adapter' };
    throw e;
  }
  if (SOFTWARE_ADAPTER.test(found.adapterName)) {
    found.device.destroy();
    return { device: 'cpu', reason: `only a software GPU adapter (${found.adapterName})` };
  }
  return { device: 'gpu', gpu: found };
}
