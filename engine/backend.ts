// Creates the batched inference backend for a model file or an in-memory checkpoint.

import type { Checkpoint, InferenceBackend, ModelInfo } from './types';
import { openCheckpoint } from './loader/checkpoint';
import { readAll } from './loader/checkpoint-reader';
import { weightBufferNeeds } from './weight-needs';
import { describeModel } from './model-spec';
import { checkAdapterFits, GpuContext, releaseGpu } from './gpu/device';
import type { WeightPrecision } from './rwkv7/weights';
import { chooseDevice, type DeviceChoice } from './cpu/device-choice';
import { modelVersion, type ModelVersion } from './versions';
import { embeddedInitialState } from './initial-states';
import { applyLoraFiles, type LoraFile } from './lora';
import { checkQuantLayers, cpuRefusal, isPrecision, precisionList, type WeightStorage } from './precision';

export interface BackendOptions {
  model: string | Checkpoint;
  slots: number;
  /** 'f16' (default), 'f32', 'int8' (per-row scales) or 'nf4' (GPU only): engine/precision.ts. */
  precision?: WeightPrecision;
  /**
   * With 'int8' or 'nf4': how many layers, from the first, are quantised (0 or unset = all; at most the model's
   * layer count); the later layers keep f16 matrices (precision.ts WeightStorage).
   */
  quantLayers?: number;
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
  /**
   * A model whose state grows per token (RWKV-7b): most tokens one slot's state may hold, set by the operator
   * (engine config maxContext; default DEFAULT_MAX_CONTEXT). Fixed-size states ignore it.
   */
  maxContext?: number;
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
  if (!isPrecision(precision)) throw new RangeError(`precision must be ${precisionList()}, got ${precision}`);
  checkQuantLayers(opts.quantLayers, precision); // the layer count is checked once the model is described
  // The tensor index first: the model is described, and checked against the adapter's limits, before its bytes are read.
  const reader = typeof opts.model === 'string' ? openCheckpoint(opts.model) : null;
  let ck: Checkpoint;
  let info: ModelInfo;
  let version: ModelVersion;
  let chosen: Awaited<ReturnType<typeof chooseDevice>>;
  try {
    const index = reader ?? (opts.model as Checkpoint);
    info = describeModel(index);
    checkQuantLayers(opts.quantLayers, precision, info.nLayer);
    version = modelVersion(info);
    // The CPU backend runs every version but not nf4: nf4 sends 'auto' to the GPU and refuses 'cpu' by name.
    const precisionOnCpu = cpuRefusal(precision);
    const cpuRuns = precisionOnCpu ? { ok: false, why: precisionOnCpu } : { ok: true };
    const needs = weightBufferNeeds(index, precision);
    // The limits are checked once the GPU is chosen: on 'auto', a software adapter's limits must not refuse a
    // model the CPU backend then runs. A version without a GPU pass runs on the CPU backend, saying why; asked
    // for the GPU by name, it is refused rather than moved.
    if (typeof version.gpu === 'string' && opts.device !== 'cpu') {
      if (opts.device === 'gpu') throw new Error(`device 'gpu': ${version.gpu}`);
      if (!cpuRuns.ok) throw new Error(`${version.gpu}, and ${cpuRuns.why}`);
      chosen = { device: 'cpu', reason: version.gpu };
    } else chosen = await chooseDevice(opts.device, opts.gpu, cpuRuns, { adapter: opts.adapter });
    if (chosen.device === 'gpu') {
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
  const storage: WeightStorage = { precision, quantLayers: opts.quantLayers ?? 0 };
  const withDefaultState = <B extends Backend>(b: B): B => {
    try {
      return Object.assign(b, { defaultState: embeddedInitialState(ck, info, b.stateSize) });
    } catch (e) {
      b.dispose();
      throw e;
    }
  };
  if (chosen.device === 'cpu') return withDefaultState(await version.cpu(ck, info, { ...opts, precision, quantLayers: storage.quantLayers }, chosen.reason));
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
      maxContext: opts.maxContext,
    };
    if (typeof version.gpu === 'string') throw new Error(`internal: ${version.gpu}`);
    const runtime = await version.gpu(gpu, ck, info, storage, runtimeOpts);
    return withDefaultState(Object.assign(runtime, { adapterName: gpu.adapterName }));
  } catch (e) {
    // Weights half uploaded: the device goes with them (a lent one keeps what the lender must free).
    if (ownsDevice) releaseGpu(gpu);
    throw e;
  }
}
