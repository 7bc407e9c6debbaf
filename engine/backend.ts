// Creates the batched inference backend for a model file or an in-memory checkpoint.

import type { Checkpoint, InferenceBackend, ModelInfo } from './types';
import { loadCheckpoint } from './loader/checkpoint';
import { describeModel } from './model-spec';
import { acquireGpu, GpuContext } from './gpu/device';
import { uploadRwkv7, WeightPrecision } from './rwkv7/weights';
import { Rwkv7Runtime } from './rwkv7/runtime';
import { chooseDevice, type DeviceChoice } from './cpu/device-choice';
import { createCpuBackend } from './rwkv7/cpu-backend';

export interface BackendOptions {
  model: string | Checkpoint;
  slots: number;
  precision?: WeightPrecision;
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
}

export type Backend = InferenceBackend & { adapterName: string; weightBytes: number; vecMaxRows: number; gemmTile: 16 | 64 };

export async function createBackend(opts: BackendOptions): Promise<Backend> {
  if (!Number.isInteger(opts.slots) || opts.slots < 1) throw new RangeError(`slots must be a positive integer, got ${opts.slots}`);
  const precision = opts.precision ?? 'f16';
  if (precision !== 'f16' && precision !== 'f32') throw new RangeError(`precision must be 'f16' or 'f32', got ${precision}`);
  const ck = typeof opts.model === 'string' ? loadCheckpoint(opts.model) : opts.model;
  const info: ModelInfo = describeModel(ck);
  if (info.version !== 'v7') {
    throw new Error(`RWKV ${info.version} models are not supported by the WebGPU engine yet; only RWKV-7 (x070) is`);
  }
  const chosen = await chooseDevice(opts.device, opts.gpu);
  if (chosen.device === 'cpu') {
    return createCpuBackend(ck, info, { ...opts, precision }, chosen.reason);
  }
  const gpu = chosen.gpu;
  const weights = uploadRwkv7(gpu.device, ck, info, precision);
  const runtime = new Rwkv7Runtime(gpu, info, weights, {
    slots: opts.slots,
    maxTokens: opts.maxTokens ?? 256,
    maxRows: opts.maxRows ?? 64,
    vecMaxRows: opts.vecMaxRows,
    gemmTile: opts.gemmTile,
  });
  return Object.assign(runtime, { adapterName: gpu.adapterName, weightBytes: weights.bytes });
}
