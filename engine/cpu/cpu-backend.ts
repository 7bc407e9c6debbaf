// The CPU backend as createBackend (backend.ts) returns it: the runtime on a version's planner, plus what callers
// print about it. versions.ts gives each version with a CPU pass `cpuBackend(its planner)`.

import type { Checkpoint, ModelInfo } from '../types';
import type { Backend, BackendOptions } from '../backend';
import { CpuRuntime, type CpuPlanner } from './cpu-runtime';
import { cpuRefusal, quantLayersNote } from '../precision';
import { productsPath } from './native-products';
import { f16StorageFromEnv } from './cpu-weight-writer';

export function cpuBackend(planner: CpuPlanner) {
  return async (ck: Checkpoint, info: ModelInfo, opts: BackendOptions, reason: string): Promise<Backend> => {
    const precision = opts.precision ?? 'f16';
    if (precision === 'nf4') throw new RangeError(`${cpuRefusal(precision)}; the CPU backend was chosen: ${reason}`);
    const runtime = await CpuRuntime.create(
      ck,
      info,
      { slots: opts.slots, maxTokens: opts.maxTokens ?? 256, maxRows: opts.maxRows ?? 64, precision, quantLayers: opts.quantLayers, threads: opts.threads, maxContext: opts.maxContext },
      planner,
    );
    const wasm = runtime.kernelVariant === 'relaxed-simd' ? 'WebAssembly SIMD kernels with fused multiply-add' : 'WebAssembly SIMD kernels';
    // f16 and int8 weights are integer panels (i16, int8), whose products run natively where the addon loaded;
    // with RWKV_CPU_F16_AS=f16 the f16 ones are f16 panels, native too.
    const halves = f16StorageFromEnv() === 'f16';
    const native = precision === 'int8' && halves ? 'integer and f16' : halves ? 'f16' : 'integer';
    const kernels = productsPath() === 'native-avx2' && precision !== 'f32' ? `${wasm}, native AVX2 ${native} products` : wasm;
    const partly = quantLayersNote({ precision, quantLayers: opts.quantLayers ?? 0 }, info.nLayer);
    const adapterName = `CPU: ${kernels}, ${runtime.threads} thread${runtime.threads === 1 ? '' : 's'}, ${precision} weights${partly} (${reason})`;
    // vecMaxRows / gemmTile tune the GPU kernels only; present so both backends have one shape.
    return Object.assign(runtime, { adapterName, kernelPath: `cpu path: ${kernels}`, vecMaxRows: 0, gemmTile: 64 as const });
  };
}
