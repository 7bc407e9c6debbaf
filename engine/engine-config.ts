// The one place an EngineConfig is checked, and the key that tells two configs apart. The shared-engine
// registry checks a config fully before it looks anything up (a bad config must never touch an engine that
// another lease serves from), and the engine factory checks it again before it allocates anything.

import type { EngineConfig } from './api';
import { ENGINE_DEFAULTS } from './engine';
import { checkLoraConfig } from './lora';
import { checkQuantLayers, isPrecision, precisionList } from './precision';
import { DEFAULT_MAX_CONTEXT, MAX_CONTEXT } from './state-shape';
import { MAX_DRAW_STEPS } from './types';

/** Bounds on the chunk sizes: the scratch buffers of one GPU pass grow with them (~18 floats per token and channel). */
export const MAX_CHUNK_TOKENS = 8192;
export const MAX_BATCH = 1024;
export const MAX_QUEUE = 1_000_000;

/** What an unset field means, so `{}` and `{ maxBatch: 8 }` are the same engine. */
const DEFAULTS: Partial<Record<keyof EngineConfig, unknown>> = {
  precision: 'f16',
  quantLayers: 0,
  maxBatch: ENGINE_DEFAULTS.maxBatch,
  chunkSize: ENGINE_DEFAULTS.chunkSize,
  prefillChunkSize: ENGINE_DEFAULTS.prefillChunkSize,
  cacheBytes: ENGINE_DEFAULTS.cacheBytes,
  maxQueue: ENGINE_DEFAULTS.maxQueue,
  decodeKeep: 0.75,
  maxContext: DEFAULT_MAX_CONTEXT,
  drawSteps: ENGINE_DEFAULTS.drawSteps,
};

function integerIn(config: EngineConfig, field: keyof EngineConfig, min: number, max: number): void {
  const v = config[field];
  if (v === undefined) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`engine config: ${field} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
}

function optionalPath(config: EngineConfig, field: 'modelPath' | 'stateDir' | 'defaultState'): void {
  const v = config[field] as unknown;
  if (v === undefined || v === null) return;
  if (typeof v !== 'string' || v.trim() === '' || v.includes('\0')) {
    throw new TypeError(`engine config: ${field} must be a non-empty path, got ${JSON.stringify(v)}`);
  }
}

/** Throws a RangeError/TypeError naming the first bad field; every check the engine would make later, made now. */
export function checkEngineConfig(config: EngineConfig): void {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    throw new TypeError(`engine config must be an object, got ${config === null ? 'null' : typeof config}`);
  }
  optionalPath(config, 'modelPath');
  optionalPath(config, 'stateDir');
  optionalPath(config, 'defaultState');
  checkLoraConfig(config.lora);
  const adapter = config.adapter as unknown;
  if (adapter !== undefined && adapter !== null) {
    const ok = typeof adapter === 'number' ? Number.isInteger(adapter) && adapter >= 0 : typeof adapter === 'string' && adapter.trim() !== '' && adapter.length <= 256 && !adapter.includes('\0');
    if (!ok) throw new TypeError(`engine config: adapter must be an adapter index (integer >= 0) or part of its name, got ${JSON.stringify(adapter)}`);
  }
  if (config.precision !== undefined && !isPrecision(config.precision)) {
    throw new RangeError(`engine config: precision must be ${precisionList()}, got ${JSON.stringify(config.precision)}`);
  }
  try {
    checkQuantLayers(config.quantLayers, config.precision ?? 'f16');
  } catch (e) {
    throw new RangeError(`engine config: ${(e as Error).message}`);
  }
  integerIn(config, 'maxBatch', 1, MAX_BATCH);
  integerIn(config, 'chunkSize', 1, MAX_CHUNK_TOKENS);
  integerIn(config, 'prefillChunkSize', 1, MAX_CHUNK_TOKENS);
  integerIn(config, 'maxQueue', 0, MAX_QUEUE);
  integerIn(config, 'maxContext', 1, MAX_CONTEXT);
  integerIn(config, 'drawSteps', 0, MAX_DRAW_STEPS);
  const cache = config.cacheBytes;
  if (cache !== undefined && (typeof cache !== 'number' || !Number.isFinite(cache) || cache < 0)) {
    throw new RangeError(`engine config: cacheBytes must be a finite number >= 0, got ${JSON.stringify(cache)}`);
  }
  const keep = config.decodeKeep;
  if (keep !== undefined && (typeof keep !== 'number' || !(keep > 0 && keep < 1))) {
    throw new RangeError(`engine config: decodeKeep must be a number in (0, 1), got ${JSON.stringify(keep)}`);
  }
}

/**
 * Every setting but the model path, defaults filled in, in a stable order: two configs with the same key
 * behave the same. Generic over the fields, so a setting added to EngineConfig later keys engines too.
 */
export function engineConfigKey(config: EngineConfig): string {
  const merged: Record<string, unknown> = { ...DEFAULTS };
  for (const [k, v] of Object.entries(config)) if (v !== undefined && v !== null) merged[k] = v;
  delete merged.modelPath;
  return stableJson(merged);
}

/** JSON with object keys sorted at every depth. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj)
      .sort()
      .filter((k) => obj[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableJson(obj[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
