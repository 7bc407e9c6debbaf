// Creates the batched inference backend for a model file or an in-memory checkpoint.

import type { Checkpoint, InferenceBackend, ModelInfo } from './types';
import { openCheckpoint } from './loader/checkpoint';
import { readAll } from './loader/checkpoint-reader';
import { weightBufferNeeds } from './weight-needs';
import { describeModel } from './model-spec';
import { checkAdapterFits, GpuContext, releaseGpu } from './gpu/device';
import type { WeightPrecision } from './rwkv7/weights';
import { chooseDevice, type DeviceChoice } from './cpu/device-choice';
import { cpuRuns, modelVersion, type ModelVersion } from './versions';
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

export async function createBackend(opts: BackendOptions): Promise<Backend> {
  if (!Number.isInteger(opts.slots) || opts.slots < 1) throw new RangeError(`slots must be a positive integer, got ${opts.slots}`);
  const precision = opts.precision ?? 'f16';
  if (precision !== 'f16' && precision !== 'f32' && precision !== 'int8') throw new RangeError(`precision must be 'f16', 'f32' or 'int8', got ${precision}`);
  if (precision === 'int8' && opts.device === 'gpu') throw new RangeError("precision 'int8' runs on the CPU backend only; use device 'cpu' or 'auto'");
  // The tensor index first: the model is described, and checked against the adapter's limits, before its bytes are read.
  const reader = typeof opts.model === 'string' ? openCheckpoint(opts.model) : null;
  let ck: Checkpoint;
  let info: ModelInfo;
  let version: ModelVersion;
  let chosen: Awaited<ReturnType<typeof chooseDevice>>;
  try {
    const index = reader ?? (opts.model as Checkpoint);
    info = describeModel(index);
    version = modelVersion(info);
    // The GPU path has no int8 weights: int8 means the CPU backend, also under 'auto'.
    const needs = precision === 'int8' ? null : weightBufferNeeds(index, precision);
    // The limits are checked once the GPU is chosen: on 'auto', a software adapter's limits must not refuse a
    // model the CPU backend then runs.
    chosen = await chooseDevice(precision === 'int8' && (opts.device ?? 'auto') === 'auto' ? 'cpu' : opts.device, opts.gpu, cpuRuns(info), { adapter: opts.adapter });
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
  if (chosen.device === 'cpu') {
    // chooseDevice picks the CPU only where cpuRuns(info) said the version has a CPU backend.
    if (!version.cpu) throw new Error(`internal: ${version.name} reached the CPU backend`);
    return withDefaultState(await version.cpu(ck, info, { ...opts, precision }, chosen.reason));
  }
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
    const runtime = version.gpu(gpu, ck, info, precision, runtimeOpts);
    return withDefaultState(Object.assign(runtime, { adapterName: gpu.adapterName }));
  } catch (e) {
    // Weights half uploaded: the device goes with them (a lent one keeps what the lender must free).
    if (ownsDevice) releaseGpu(gpu);
    throw e;
  }
}
