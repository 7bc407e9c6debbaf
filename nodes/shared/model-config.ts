// The model configuration both hosts collect (n8n credential, Node-RED config node) and its
// translation into the engine's EngineConfig. Field names are the ones shown in the editors.

import * as path from 'path';
import type { EngineConfig } from '../../engine/api';
import type { RemoteEngineOptions } from '../../engine/remote-engine';
import { optionalInteger, optionalName, optionalNumber } from './coerce';
import { ParameterError } from './parameter-error';
import { isPrecision, precisionList } from '../../engine/precision';
import { MAX_CONTEXT } from '../../engine/state-shape';
import { MAX_DRAW_STEPS } from '../../engine/types';

export interface ModelConfigFields {
  /** .st or .pth file; empty = the bundled default model. */
  modelPath?: unknown;
  precision?: unknown;
  /**
   * int8 / nf4: layers quantised, from the first (0 or blank = all). Ignored with f16 and f32, where the editors
   * hide the field (a value left in it from an earlier choice is not a setting).
   */
  quantLayers?: unknown;
  /** auto | gpu | cpu. */
  device?: unknown;
  maxBatch?: unknown;
  chunkSize?: unknown;
  prefillChunkSize?: unknown;
  /** Share of decode speed kept while a long prompt is read (0..1 exclusive). */
  decodeKeep?: unknown;
  /** Decode steps one GPU call may run, each token drawn on the GPU (EngineConfig.drawSteps). */
  drawSteps?: unknown;
  /** Prefix-state cache bound in MiB (editors ask for MiB; the engine takes bytes). */
  cacheMiB?: unknown;
  stateDir?: unknown;
  /** State file (in the state folder) that requests naming no state start from. */
  defaultState?: unknown;
  maxQueue?: unknown;
  // Operator limits: set here only, never from a message or item.
  /** Most tokens one generation may ask for. */
  maxTokensLimit?: unknown;
  /** Deadline of one request in seconds, queueing included; 0 = none (the engine takes ms). */
  requestTimeoutSeconds?: unknown;
  /** Most named initial states loaded at once. */
  maxStates?: unknown;
  /** Models whose state grows per token (RWKV-7b): most tokens of one request's context. */
  maxContext?: unknown;
  /** Where the engine runs: 'process' (this process, default) or 'server' (`rwkv-flow serve` at serverUrl). */
  engineMode?: unknown;
  serverUrl?: unknown;
  /** The server's API key (bearer), if it was started with one. */
  apiKey?: unknown;
}

/**
 * The engine settings, or, in server mode, where the server is: the server owns the model and all of its
 * settings then, so the other fields are not used.
 */
export interface ModelConfig extends EngineConfig {
  server?: RemoteEngineOptions;
}

export const ENGINE_MODES = ['process', 'server'] as const;

const MIB = 1024 * 1024;
/** setTimeout's largest delay, in whole seconds (about 24.8 days). */
const MAX_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);
const MAX_TOKENS_LIMIT = 1 << 20;

/**
 * `baseDir`: the host's own folder (Node-RED's userDir, n8n's user folder). A relative model path or state folder
 * is taken inside it, not in whatever working directory the host process happened to start in.
 */
export function parseModelConfig(fields: ModelConfigFields, baseDir?: string): ModelConfig {
  const mode = optionalName('engineMode', fields.engineMode) ?? 'process';
  if (mode === 'server') return { server: parseServer(fields) };
  if (mode !== 'process') throw new ParameterError('engineMode', `must be "process" or "server", got ${JSON.stringify(mode)}`);
  const config: EngineConfig = {};
  const modelPath = optionalName('modelPath', fields.modelPath);
  if (modelPath !== undefined) config.modelPath = inside(baseDir, modelPath);
  const precision = optionalName('precision', fields.precision);
  if (precision !== undefined) {
    if (!isPrecision(precision)) {
      throw new ParameterError('precision', `must be ${precisionList('"')} (nf4: GPU backend only), got ${JSON.stringify(precision)}`);
    }
    config.precision = precision;
  }
  const quantLayers = optionalInteger('quantLayers', fields.quantLayers, 0);
  if (quantLayers !== undefined && quantLayers > 0 && (config.precision === 'int8' || config.precision === 'nf4')) config.quantLayers = quantLayers;
  const device = optionalName('device', fields.device);
  if (device !== undefined) {
    if (device !== 'auto' && device !== 'gpu' && device !== 'cpu') {
      throw new ParameterError('device', `must be "auto", "gpu" or "cpu", got ${JSON.stringify(device)}`);
    }
    config.device = device;
  }
  const maxBatch = optionalInteger('maxBatch', fields.maxBatch, 1);
  if (maxBatch !== undefined) config.maxBatch = maxBatch;
  const chunkSize = optionalInteger('chunkSize', fields.chunkSize, 1);
  if (chunkSize !== undefined) config.chunkSize = chunkSize;
  const prefillChunkSize = optionalInteger('prefillChunkSize', fields.prefillChunkSize, 1);
  if (prefillChunkSize !== undefined) config.prefillChunkSize = prefillChunkSize;
  const decodeKeep = optionalNumber('decodeKeep', fields.decodeKeep);
  if (decodeKeep !== undefined) {
    if (!(decodeKeep > 0 && decodeKeep < 1)) throw new ParameterError('decodeKeep', `must be between 0 and 1 (exclusive), got ${decodeKeep}`);
    config.decodeKeep = decodeKeep;
  }
  const drawSteps = optionalInteger('drawSteps', fields.drawSteps, 0);
  if (drawSteps !== undefined) {
    if (drawSteps > MAX_DRAW_STEPS) throw new ParameterError('drawSteps', `must be at most ${MAX_DRAW_STEPS}, got ${drawSteps}`);
    config.drawSteps = drawSteps;
  }
  const cacheMiB = optionalNumber('cacheMiB', fields.cacheMiB);
  if (cacheMiB !== undefined) {
    if (cacheMiB < 0) throw new ParameterError('cacheMiB', `must be ≥ 0, got ${cacheMiB}`);
    config.cacheBytes = Math.round(cacheMiB * MIB);
  }
  const stateDir = optionalName('stateDir', fields.stateDir);
  if (stateDir !== undefined) config.stateDir = inside(baseDir, stateDir);
  // A name inside the state folder (the engine's state folder confines it), not a host path.
  const defaultState = optionalName('defaultState', fields.defaultState);
  if (defaultState !== undefined) config.defaultState = defaultState;
  const maxQueue = optionalInteger('maxQueue', fields.maxQueue, 0);
  if (maxQueue !== undefined) config.maxQueue = maxQueue;
  const maxTokensLimit = optionalInteger('maxTokensLimit', fields.maxTokensLimit, 1);
  if (maxTokensLimit !== undefined) {
    if (maxTokensLimit > MAX_TOKENS_LIMIT) throw new ParameterError('maxTokensLimit', `must be at most ${MAX_TOKENS_LIMIT}, got ${maxTokensLimit}`);
    config.maxTokensLimit = maxTokensLimit;
  }
  const timeout = optionalNumber('requestTimeoutSeconds', fields.requestTimeoutSeconds);
  if (timeout !== undefined) {
    if (!(timeout >= 0 && timeout <= MAX_TIMEOUT_SECONDS)) {
      throw new ParameterError('requestTimeoutSeconds', `must be between 0 (no deadline) and ${MAX_TIMEOUT_SECONDS}, got ${timeout}`);
    }
    config.requestTimeoutMs = Math.round(timeout * 1000);
  }
  const maxStates = optionalInteger('maxStates', fields.maxStates, 0);
  if (maxStates !== undefined) config.maxStates = maxStates;
  const maxContext = optionalInteger('maxContext', fields.maxContext, 1);
  if (maxContext !== undefined) {
    if (maxContext > MAX_CONTEXT) throw new ParameterError('maxContext', `must be at most ${MAX_CONTEXT}, got ${maxContext}`);
    config.maxContext = maxContext;
  }
  return config;
}

function parseServer(fields: ModelConfigFields): RemoteEngineOptions {
  const url = optionalName('serverUrl', fields.serverUrl);
  if (url === undefined) throw new ParameterError('serverUrl', 'is required when the engine runs on a server (e.g. http://127.0.0.1:8720)');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ParameterError('serverUrl', `is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ParameterError('serverUrl', `must start with http:// or https://, got ${JSON.stringify(url)}`);
  const apiKey = optionalName('apiKey', fields.apiKey);
  return apiKey !== undefined ? { url, apiKey } : { url };
}

function inside(baseDir: string | undefined, file: string): string {
  return baseDir && !path.isAbsolute(file) ? path.resolve(baseDir, file) : file;
}
