// WebGPU device acquisition through Dawn (npm `webgpu`). The package is ESM-only, so it is loaded with a
// dynamic import that TypeScript keeps as-is in CommonJS output.
//
// A device fails for good on loss or on an uncaptured error (a validation error is an engine bug, and the
// results of the commands that caused it are garbage): either makes the context `broken`, which every later
// use reports, and its watchers (the runtimes on it) are told once so they can fail their requests at once.
// Whoever acquired a device releases it with releaseGpu, which destroys it and all its memory.
//
// Capabilities are decided here, once: Dawn's instance is created with `vulkan_enable_f16_on_nvidia` (NVIDIA's
// Vulkan driver otherwise hides shader-f16), and only when the adapter has everything else the subgroup-matrix
// kernels need is a second instance with `allow_unsafe_apis` asked whether it offers subgroup matrices; that
// instance is used only if it does. Features are requested only when present (capabilities.ts).

import {
  AdapterCapabilities,
  chooseKernelPath,
  featuresFor,
  KERNEL_PATH_ENV,
  isCpuDriverName,
  KernelPath,
  mayOfferSubgroupMatrix,
  supportsSubgroupMatrix,
  parseKernelPath,
} from './capabilities';
import { emulationRequested, markEmulating } from './subgroup-matrix-emulation';

export interface GpuContext {
  device: GPUDevice;
  adapterName: string;
  features: Set<string>;
  /** Set once the device is lost; every later use must fail with this message. */
  lostReason: string | null;
  /** Subgroups exist and are exactly 32 lanes (NVIDIA): matrix kernels then reduce rows with subgroupAdd. */
  subgroup32: boolean;
  /** The one subgroup size the adapter runs (its min and max agree), or 0 when it varies or there are no subgroups. */
  subgroupSize: number;
  /** The matrix kernels this device runs (capabilities.ts); f32 weights always run the f32 arithmetic. */
  kernelPath: KernelPath;
  /** Dawn toggles the instance was created with (for `rwkv-flow info` and benchmark records). */
  dawnToggles: string[];
  /** First uncaptured WebGPU error (a validation error is an engine bug): reported by the next call. */
  error: string | null;
  /** Told once, with a non-empty message, when the device is lost or hits an uncaptured error. */
  readonly watchers: Set<(reason: string) => void>;
  /** Set by releaseGpu: the loss that follows is the expected end, not a failure. */
  released: boolean;
}

/** Why the device can no longer be used, or null while it can. */
export function gpuBroken(ctx: GpuContext): string | null {
  return ctx.lostReason ?? ctx.error;
}

/** Calls `fn` once when the device breaks; returns the function that stops watching. */
export function watchGpu(ctx: GpuContext, fn: (reason: string) => void): () => void {
  ctx.watchers.add(fn);
  return () => ctx.watchers.delete(fn);
}

/** Destroys a device this process acquired: its buffers, pipelines and driver memory go with it. */
export function releaseGpu(ctx: GpuContext): void {
  if (ctx.released) return;
  ctx.released = true;
  ctx.watchers.clear();
  ctx.device.destroy();
}

function markBroken(ctx: GpuContext): void {
  const reason = gpuBroken(ctx);
  if (!reason || ctx.released) return;
  const watchers = [...ctx.watchers];
  ctx.watchers.clear();
  for (const fn of watchers) {
    try {
      fn(reason);
    } catch (e) {
      console.error(`[rwkv-flow] while failing requests on a broken GPU device: ${(e as Error).message}`);
    }
  }
}

/** Dawn's loss messages can be empty; the message a caller sees never is. */
export function deviceLostMessage(reason: string | undefined, message: string | undefined): string {
  const why = reason && reason !== 'unknown' ? ` (${reason})` : '';
  const detail = message && message.trim() ? `: ${message.trim()}` : ': the driver gave no reason';
  return `GPU device lost${why}${detail}`;
}

export class GpuUnavailableError extends Error {}

/** A model whose weights exceed the adapter's buffer limits (not a missing GPU: 'auto' must not hide it). */
export class ModelTooLargeError extends Error {}

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

/** One Dawn instance per set of toggles and adapter, kept referenced: a collected instance leaves GPU promises unsettled. */
const instances = new Map<string, GPU>();

/** `adapter`: Dawn's adapter flag, a substring of the adapter's name (case-sensitive); undefined = any. */
function dawnInstance(dawn: { create: (o: string[]) => GPU }, toggles: string[], adapter?: string): GPU {
  const key = instanceKey(toggles, adapter);
  let gpu = instances.get(key);
  if (!gpu) instances.set(key, (gpu = dawn.create([...instanceFlags(toggles), ...(adapter !== undefined ? [`adapter=${adapter}`] : [])])));
  return gpu;
}

function instanceKey(toggles: string[], adapter?: string): string {
  return JSON.stringify([toggles, adapter ?? null]);
}

/** One WebGPU adapter of this machine as `rwkv-flow adapters` lists it. */
export interface AdapterListing {
  index: number;
  name: string;
  backend: string;
  /** Largest buffer, and largest storage binding (one weight tensor must fit both), in bytes. */
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
}

/** An adapter flag no adapter has: Dawn then fails and names every adapter it has, the only listing it offers. */
const NO_SUCH_ADAPTER = '\u0001rwkv-flow: list the adapters';

/** The adapters in Dawn's "Available adapters:" error text ("* backend: 'vulkan', name: 'NVIDIA H200'"). */
export function parseAdapterList(message: string): { backend: string; name: string }[] {
  const out: { backend: string; name: string }[] = [];
  for (const m of message.matchAll(/^\s*\* backend: '([^']*)', name: '(.*)'\s*$/gm)) out.push({ backend: m[1], name: m[2] });
  return out;
}

/** Every WebGPU adapter Dawn finds, in its order (the index `adapter` selects by), with its buffer limits. */
export async function listAdapters(): Promise<AdapterListing[]> {
  const dawn = await loadDawn();
  let names: { backend: string; name: string }[] = [];
  try {
    await dawn.create([`adapter=${NO_SUCH_ADAPTER}`]).requestAdapter();
  } catch (e) {
    names = parseAdapterList(String((e as Error).message));
  }
  const out: AdapterListing[] = [];
  for (const [index, { backend, name }] of names.entries()) {
    const adapter = await dawnInstance(dawn, [F16_TOGGLE], name).requestAdapter({ powerPreference: 'high-performance' });
    const lim = adapter?.limits;
    out.push({ index, name, backend, maxBufferSize: lim?.maxBufferSize ?? 0, maxStorageBufferBindingSize: lim?.maxStorageBufferBindingSize ?? 0 });
  }
  return out;
}

/** The adapter name an operator's choice (an index of listAdapters, or a case-insensitive name substring) means. */
export function selectAdapter(adapters: readonly Pick<AdapterListing, 'index' | 'name'>[], choice: number | string): string {
  const known = adapters.length ? adapters.map((a) => `${a.index}: ${a.name}`).join('; ') : 'none found';
  if (typeof choice === 'number') {
    const found = Number.isInteger(choice) ? adapters[choice] : undefined;
    if (!found) throw new Error(`adapter ${choice}: no such adapter index (adapters: ${known})`);
    return found.name;
  }
  const wanted = String(choice).toLowerCase();
  const found = adapters.find((a) => a.name.toLowerCase().includes(wanted));
  if (!wanted || !found) throw new Error(`adapter ${JSON.stringify(choice)}: no adapter name contains it (adapters: ${known})`);
  return found.name;
}

/**
 * Refuses a model whose weights cannot fit the adapter's buffer limits, naming the sizes, before any weight
 * is read or uploaded: every weight tensor is one buffer and one storage binding.
 */
export function checkAdapterFits(limits: Pick<GPUSupportedLimits, 'maxBufferSize' | 'maxStorageBufferBindingSize'>, adapterName: string, req: DeviceRequest): void {
  const what = req.largest ? ` (${req.largest})` : '';
  const binding = req.maxBindingBytes ?? 0;
  const buffer = Math.max(req.maxBufferBytes ?? 0, binding);
  if (binding > limits.maxStorageBufferBindingSize) {
    throw new ModelTooLargeError(
      `the model does not fit adapter ${adapterName}: it needs a storage binding of ${binding} bytes${what}, the adapter binds at most ${limits.maxStorageBufferBindingSize} bytes (maxStorageBufferBindingSize)`,
    );
  }
  if (buffer > limits.maxBufferSize) {
    throw new ModelTooLargeError(
      `the model does not fit adapter ${adapterName}: it needs a buffer of ${buffer} bytes${what}, the adapter allows at most ${limits.maxBufferSize} bytes (maxBufferSize)`,
    );
  }
}

/** Dawn's command-line style instance flags for a list of toggles (a leading '-' disables one). */
function instanceFlags(toggles: string[]): string[] {
  const on = toggles.filter((t) => !t.startsWith('-'));
  const off = toggles.filter((t) => t.startsWith('-')).map((t) => t.slice(1));
  return [...(on.length ? [`enable-dawn-features=${on.join(',')}`] : []), ...(off.length ? [`disable-dawn-features=${off.join(',')}`] : [])];
}

/** Without it NVIDIA's Vulkan driver offers no shader-f16 through Dawn (seen on the H200). */
const F16_TOGGLE = 'vulkan_enable_f16_on_nvidia';
/** Exposes chromium-experimental-subgroup-matrix (and other unsafe APIs): used only when it yields that. */
const UNSAFE_TOGGLE = 'allow_unsafe_apis';

export function adapterCapabilities(adapter: GPUAdapter): AdapterCapabilities {
  const info = adapter.info as GPUAdapterInfo & {
    subgroupMinSize?: number;
    subgroupMaxSize?: number;
    subgroupMatrixConfigs?: AdapterCapabilities['subgroupMatrixConfigs'];
  };
  return {
    features: new Set([...adapter.features].map(String)),
    cpuDriver: isCpuDriverName([info.vendor, info.architecture, info.device, info.description].join(' ')),
    subgroupMinSize: info.subgroupMinSize,
    subgroupMaxSize: info.subgroupMaxSize,
    subgroupMatrixConfigs: info.subgroupMatrixConfigs ? [...info.subgroupMatrixConfigs] : undefined,
  };
}

export interface DeviceRequest {
  /** Bytes the largest single storage buffer binding must hold. */
  maxBindingBytes?: number;
  /** Total bytes of the largest buffer. */
  maxBufferBytes?: number;
  /** What needs those bytes (e.g. "tensor emb.weight [65536, 2048] as f16"), for the error when they do not fit. */
  largest?: string;
  /** The adapter to use: an index of listAdapters() or a substring of its name (default: Dawn's high-performance one). */
  adapter?: number | string;
  /** The kernel path to run (default: RWKV_FLOW_KERNEL_PATH, else the best the adapter has); one the adapter cannot run is an error. */
  kernelPath?: KernelPath;
  /** Benchmarks: Dawn timestamps at full resolution (by default they are rounded to 65.536 µs). */
  exactTimestamps?: boolean;
  /**
   * Tests and development: where the adapter has shader-f16 but no subgroup matrices, run the 'subgroup-matrix' path
   * with its matrices emulated in plain WGSL (slow; gpu/subgroup-matrix-emulation.ts). Default:
   * RWKV_FLOW_EMULATE_SUBGROUP_MATRIX. Applies only when that path is asked for.
   */
  emulateSubgroupMatrix?: boolean;
  /** Probes only: more Dawn toggles for the instance (e.g. 'disable_robustness'), to measure what a toggle costs. */
  extraToggles?: string[];
}

/** The operator's choice from the environment, if any. */
function envKernelPath(): KernelPath | undefined {
  const v = process.env[KERNEL_PATH_ENV];
  return v && v.trim() ? parseKernelPath(v.trim(), KERNEL_PATH_ENV) : undefined;
}

/** The limits the engine asks of an adapter: the most it offers of what large models and the kernels use. */
export function engineLimits(lim: GPUSupportedLimits): Record<string, number> {
  return {
    maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
    maxBufferSize: lim.maxBufferSize,
    maxStorageBuffersPerShaderStage: Math.min(lim.maxStorageBuffersPerShaderStage, 10),
    maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: lim.maxComputeWorkgroupSizeX,
  };
}

export async function acquireGpu(req: DeviceRequest = {}): Promise<GpuContext> {
  const dawn = await loadDawn();
  const wanted = req.kernelPath ?? envKernelPath();
  const base = [F16_TOGGLE, ...(req.exactTimestamps ? ['-timestamp_quantization'] : []), ...(req.extraToggles ?? [])];
  let toggles = base;
  const named = req.adapter === undefined ? undefined : selectAdapter(await listAdapters(), req.adapter);
  let adapter = await dawnInstance(dawn, toggles, named).requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new GpuUnavailableError(named === undefined ? NO_ADAPTER_HELP : `adapter ${named} could not be opened`);
  if ((wanted ?? 'subgroup-matrix') === 'subgroup-matrix' && mayOfferSubgroupMatrix(adapterCapabilities(adapter))) {
    const unsafe = [...base, UNSAFE_TOGGLE];
    const candidate = await dawnInstance(dawn, unsafe, named).requestAdapter({ powerPreference: 'high-performance' });
    if (candidate && supportsSubgroupMatrix(adapterCapabilities(candidate))) {
      adapter = candidate;
      toggles = unsafe;
    } else {
      instances.delete(instanceKey(unsafe, named)); // not needed: nothing of it is in use
    }
  }
  const caps = adapterCapabilities(adapter);
  // Emulated only where the path is asked for and the adapter lacks just the matrices (f16 loads are real).
  const emulate = wanted === 'subgroup-matrix' && (req.emulateSubgroupMatrix ?? emulationRequested()) && !supportsSubgroupMatrix(caps) && caps.features.has('shader-f16');
  const kernelPath = emulate ? 'subgroup-matrix' : chooseKernelPath(caps, wanted);
  const lim = adapter.limits;
  const info0 = adapter.info;
  checkAdapterFits(lim, [info0.vendor, info0.architecture, info0.device, info0.description].filter((s) => s && s.length).join(' ') || 'unknown adapter', req);
  const features = ['subgroups', 'timestamp-query', ...featuresFor(kernelPath)].filter((f) => adapter.features.has(f)) as GPUFeatureName[];
  const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: engineLimits(lim) });
  if (emulate) markEmulating(device);
  const info = adapter.info;
  const adapterName =
    ([info.vendor, info.architecture, info.device, info.description].filter((s) => s && s.length).join(' ') ||
    'unknown adapter') + (emulate ? ' (subgroup matrices emulated)' : '');
  const sg = info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
  const subgroup32 = features.includes('subgroups' as GPUFeatureName) && sg.subgroupMinSize === 32 && sg.subgroupMaxSize === 32;
  const fixed = features.includes('subgroups' as GPUFeatureName) && sg.subgroupMinSize !== undefined && sg.subgroupMinSize === sg.subgroupMaxSize;
  const ctx: GpuContext = {
    device,
    adapterName,
    features: new Set(features),
    subgroup32,
    subgroupSize: fixed ? sg.subgroupMinSize! : 0,
    kernelPath,
    dawnToggles: toggles,
    lostReason: null,
    error: null,
    watchers: new Set(),
    released: false,
  };
  device.lost.then((l) => {
    if (ctx.released) return;
    ctx.lostReason ??= deviceLostMessage(l?.reason, l?.message);
    console.error(`[rwkv-flow] ${ctx.lostReason}`);
    markBroken(ctx);
  });
  device.onuncapturederror = (e) => {
    if (ctx.released || ctx.error) return; // the first error broke the device; later ones are its echoes
    // Validation errors mean a bug in the engine; surface them loudly instead of silently producing zeros.
    const detail = (e as GPUUncapturedErrorEvent).error?.message?.trim();
    ctx.error = `WebGPU error: ${detail || 'an uncaptured error without a message'}`;
    console.error(`[rwkv-flow] ${ctx.error}`);
    markBroken(ctx);
  };
  return ctx;
}
