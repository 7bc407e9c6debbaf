// The one place that knows the RWKV versions: each version is a folder (engine/rwkv{4,5,6,7}/, its weights,
// forward pass and shaders) and appears here once, with how the GPU backend builds it and how the CPU backend
// does (the version's planner on engine/cpu/cpu-runtime.ts). createBackend (backend.ts) looks a model's version
// up here and knows nothing else of it.

import type { Checkpoint, InferenceBackend, ModelInfo, RwkvVersion } from './types';
import type { Backend, BackendOptions } from './backend';
import type { GpuContext } from './gpu/device';
import type { SlotRuntimeOptions } from './gpu/slot-runtime';
import type { WeightStorage } from './precision';
import { uploadRwkv7 } from './rwkv7/weights';
import { weightLayoutFor } from './rwkv7/weight-blocks';
import { Rwkv7Runtime } from './rwkv7/runtime';
import { cpuBackend } from './cpu/cpu-backend';
import { planRwkv7CpuModel } from './rwkv7/cpu-forward';
import { finchCpuPlanner } from './rwkv6/cpu-forward';
import { planRwkv6Cpu } from './rwkv6/cpu-weights';
import { planRwkv5Cpu } from './rwkv5/cpu-weights';
import { planRwkv4CpuModel } from './rwkv4/cpu-forward';
import { uploadRwkv6 } from './rwkv6/weights';
import { Rwkv6Runtime } from './rwkv6/runtime';
import { uploadRwkv5 } from './rwkv5/weights';
import { uploadRwkv4 } from './rwkv4/weights';
import { Rwkv4Runtime } from './rwkv4/runtime';

/** A GPU runtime as createBackend completes it (it adds the adapter's name and the default state). */
export type GpuRuntime = InferenceBackend & { weightBytes: number; vecMaxRows: number; gemmTile: 16 | 64; readonly kernelPath: string };

export interface ModelVersion {
  /** As messages name it. */
  readonly name: string;
  /**
   * Uploads the weights to the device (yielding to the event loop as it goes) and builds the batched runtime on them;
   * a string when the version has no GPU pass yet: why, and the model runs on the CPU backend instead.
   */
  gpu: ((gpu: GpuContext, ck: Checkpoint, info: ModelInfo, storage: WeightStorage, opts: SlotRuntimeOptions) => Promise<GpuRuntime>) | string;
  /** Builds the CPU backend (engine/cpu/cpu-backend.ts on the version's planner). */
  cpu(ck: Checkpoint, info: ModelInfo, opts: BackendOptions, reason: string): Promise<Backend>;
}

/** The runtime with the bytes of its weights. */
function withBytes<R extends object>(runtime: R, weights: { bytes: number }): R & { weightBytes: number } {
  return Object.assign(runtime, { weightBytes: weights.bytes });
}

/** RWKV-7's backends, which RWKV-7a and 7b run on too (the weights say whether the DeepEmbed gate and the DEA attention are there). */
const RWKV7_PASS: Omit<ModelVersion, 'name'> = {
  gpu: async (gpu, ck, info, storage, opts) => {
    const w = await uploadRwkv7(gpu.device, ck, info, storage, { layout: weightLayoutFor(gpu.kernelPath) });
    return withBytes(new Rwkv7Runtime(gpu, info, w, opts), w);
  },
  cpu: cpuBackend(planRwkv7CpuModel),
};

/** Versions describeModel recognises and checks that no backend runs yet, and why (said before anything loads). */
const REFUSED = {} as const;

export const VERSIONS: Readonly<Record<RwkvVersion, ModelVersion>> = {
  v7: { name: 'RWKV-7', ...RWKV7_PASS },
  // RWKV-7a is RWKV-7's pass plus the DeepEmbed gate on the channel mix (in engine/rwkv7/, on both backends).
  v7a: { name: 'RWKV-7a', ...RWKV7_PASS },
  // RWKV-7b is 7a plus the DEA attention over a cache that grows per token (rwkv7/cpu-dea.ts on the CPU,
  // shaders/rwkv7b_dea_*.wgsl on the GPU); its state carries the rows (state-shape.ts).
  v7b: { name: 'RWKV-7b', ...RWKV7_PASS },
  v6: {
    name: 'RWKV-6',
    gpu: async (gpu, ck, info, storage, opts) => {
      const w = await uploadRwkv6(gpu.device, ck, info, storage);
      return withBytes(new Rwkv6Runtime(gpu, info, w, opts), w);
    },
    cpu: cpuBackend(finchCpuPlanner(planRwkv6Cpu)),
  },
  // RWKV-5.2 runs on RWKV-6's pass without its data-dependent parts (engine/rwkv5/weights.ts).
  v5: {
    name: 'RWKV-5.2',
    gpu: async (gpu, ck, info, storage, opts) => {
      const w = await uploadRwkv5(gpu.device, ck, info, storage);
      return withBytes(new Rwkv6Runtime(gpu, info, w, opts), w);
    },
    cpu: cpuBackend(finchCpuPlanner(planRwkv5Cpu)),
  },
  v4: {
    name: 'RWKV-4',
    gpu: async (gpu, ck, info, storage, opts) => {
      const w = await uploadRwkv4(gpu.device, ck, info, storage);
      return withBytes(new Rwkv4Runtime(gpu, info, w, opts), w);
    },
    cpu: cpuBackend(planRwkv4CpuModel),
  },
};

/** The entry of a model's version; throws for a version no backend runs. */
export function modelVersion(info: Pick<ModelInfo, 'version'>): ModelVersion {
  if (Object.prototype.hasOwnProperty.call(REFUSED, info.version)) throw new Error((REFUSED as Record<string, string>)[info.version]);
  const v = Object.prototype.hasOwnProperty.call(VERSIONS, info.version) ? VERSIONS[info.version as keyof typeof VERSIONS] : undefined;
  if (!v) throw new Error(`RWKV ${String(info.version)} models are not supported; the engine runs ${Object.values(VERSIONS).map((e) => e.name).join(', ')}`);
  return v;
}
