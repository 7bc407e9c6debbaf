// Creates the batched inference backend for a model file or an in-memory checkpoint.

import type { Checkpoint, InferenceBackend, ModelInfo } from './types';
import { openCheckpoint } from './loader/checkpoint';
import { readAll } from './loader/checkpoint-reader';
import { weightBufferNeeds } from './weight-needs';
import { describeModel } from './model-spec';
import { checkAdapterFits, GpuContext, releaseGpu } from './gpu/device';
import { uploadRwkv7, WeightPrecision } from './rwkv7/weights';
import { Rwkv7Runtime } from './rwkv7/runtime';
import { uploadRwkv6 } from './rwkv6/weights';
import { uploadRwkv5 } from './rwkv5/weights';
import { Rwkv6Runtime } from './rwkv6/runtime';
import { chooseDevice, type DeviceChoice } from './cpu/device-choice';
import { createCpuBackend } from './rwkv7/cpu-backend';
import { embeddedInitialState } from './initial-states';
import { applyLoraFiles, type LoraFile } from './lora';

export interface BackendOptions {
  model: string | Checkpoint;
  slots: number;
  /** 'int8' (per-row scales): the CPU backend only. */
  precision?: WeightPrecision | 'int8';
  /** Most tokens one GPU pass processes; larger calls are split into several passes (still one round trip). */
  maxTokens?: number;
  /** Most logits rows one pass returns. */
  maxRows?: number;
  /** Token count up to which matrix products use the streaming kernel (see RuntimeOptions). */
  vecMaxRows?: number;
  /** Tokens per tile of the tiled matrix kernel (see RuntimeOptions). */
  gemmTile?: 16 | 64;
  /** Reuse an existing device (tests, several models in one process). */
  gpu?: GpuContext;
  /** 'auto' (default): the GPU when a hardware adapter exists, else the CPU backend; 'gpu' or 'cpu' to force. */
  device?: DeviceChoice;
  /** CPU backend only: threads computing (default: every core). */
  threads?: number;
  /** Which GPU adapter: an index of `rwkv-flow adapters` or a substring of its name (gpu/device.ts). */
  adapter?: number | string;
  /** LoRA files merged into the weights before anything else reads them (resolved by engine/lora.ts). */
  lora?: readonly LoraFile[];
}

export type Backend = InferenceBackend & {
  adapterName: string;
  weightBytes: number;
  vecMaxRows: number;
  gemmTile: 16 | 64;
  /** Which matrix kernels run (capabilities.ts, rwkv7/matmul.ts), as one line. */
  readonly kernelPath: string;
};

/** Versions the WebGPU engine runs. */
const SUPPORTED: readonly string[] = ['v5', 'v6', 'v7'];

export async function createBackend(opts: BackendOptions): Promise<Backend> {
  if (!Number.isInteger(opts.slots) || opts.slots < 1) throw new RangeError(`slots must be a positive integer, got ${opts.slots}`);
  const precision = opts.precision ?? 'f16';
  if (precision !== 'f16' && precision !== 'f32' && precision !== 'int8') throw new RangeError(`precision must be 'f16', 'f32' or 'int8', got ${precision}`);
  if (precision === 'int8' && opts.device === 'gpu') throw new RangeError("precision 'int8' runs on the CPU backend only; use device 'cpu' or 'auto'");
  // The tensor index first: the model is described, and checked against the adapter's limits, before its bytes are read.
  const reader = typeof opts.model === 'string' ? openCheckpoint(opts.model) : null;
  let ck: Checkpoint;
  let info: ModelInfo;
  let chosen: Awaited<ReturnType<typeof chooseDevice>>;
  try {
    const index = reader ?? (opts.model as Checkpoint);
    info = describeModel(index);
    if (!SUPPORTED.includes(info.version)) {
      throw new Error(`RWKV ${info.version} models are not supported by the WebGPU engine yet; RWKV-5.2, RWKV-6 and RWKV-7 are`);
    }
    const cpuRuns = info.version === 'v7' ? { ok: true } : { ok: false, why: `the CPU backend runs RWKV-7 models so far, this one is RWKV ${info.version}` };
    // The GPU path has no int8 weights: int8 means the CPU backend, also under 'auto'.
    const needs = precision === 'int8' ? null : weightBufferNeeds(index, precision);
    // The limits are checked once the GPU is chosen: on 'auto', a software adapter's limits must not refuse a
    // model the CPU backend then runs.
    chosen = await chooseDevice(precision === 'int8' && (opts.device ?? 'auto') === 'auto' ? 'cpu' : opts.device, opts.gpu, cpuRuns, { adapter: opts.adapter });
    if (chosen.device === 'gpu' && needs) {
      try {
        checkAdapterFits(chosen.gpu.device.limits, chosen.gpu.adapterName, needs); // a lent device too
      } catch (e) {
        if (!opts.gpu) releaseGpu(chosen.gpu);
        throw e;
      }
    }
  } catch (e) {
    reader?.close();
    throw e;
  }
  try {
    ck = applyLoraFiles(reader ? readAll(reader) : (opts.model as Checkpoint), opts.lora ?? []);
  } catch (e) {
    if (chosen.device === 'gpu' && !opts.gpu) releaseGpu(chosen.gpu);
    throw e;
  }
  const withDefaultState = <B extends Backend>(b: B): B => {
    try {
      return Object.assign(b, { defaultState: embeddedInitialState(ck, info, b.stateSize) });
    } catch (e) {
      b.dispose();
      throw e;
    }
  };
  if (chosen.device === 'cpu') return withDefaultState(await createCpuBackend(ck, info, { ...opts, precision }, chosen.reason));
  if (precision === 'int8') throw new Error('internal: int8 weights reached the GPU path');
  // A device acquired here belongs to the backend, which destroys it on dispose; one lent in is the lender's.
  const ownsDevice = !opts.gpu;
  const gpu = chosen.gpu;
  try {
    const runtimeOpts = {
      slots: opts.slots,
      maxTokens: opts.maxTokens ?? 256,
      maxRows: opts.maxRows ?? 64,
      vecMaxRows: opts.vecMaxRows,
      gemmTile: opts.gemmTile,
      ownsDevice,
    };
    // One folder per version (engine/rwkv{5,6,7}/); RWKV-5.2 runs on RWKV-6's pass without its data-dependent parts.
    const weights =
      info.version === 'v7' ? uploadRwkv7(gpu.device, ck, info, precision)
      : info.version === 'v6' ? uploadRwkv6(gpu.device, ck, info, precision)
      : uploadRwkv5(gpu.device, ck, info, precision);
    const runtime = 'common' in weights ? new Rwkv6Runtime(gpu, info, weights, runtimeOpts) : new Rwkv7Runtime(gpu, info, weights, runtimeOpts);
    return withDefaultState(Object.assign(runtime, { adapterName: gpu.adapterName, weightBytes: weights.bytes }));
  } catch (e) {
    // Weights half uploaded: the device goes with them (a lent one keeps what the lender must free).
    if (ownsDevice) releaseGpu(gpu);
    throw e;
  }
}
