// Building an RwkvEngine from an EngineConfig: model file (or the bundled default), GPU backend,
// World tokenizer (restricted to the model's rows for reduced-vocabulary models).

import * as fs from 'fs';
import * as path from 'path';
import type { EngineConfig } from './api';
import { ENGINE_DEFAULTS, RwkvEngine } from './engine';
import { checkEngineConfig } from './engine-config';
import { prepareConstraintVocabulary } from './constraint';
import { resolveLoraFiles } from './lora';
import { packageRoot } from './package-root';
import { WorldTokenizer } from './tokenizer';
import type { ModelInfo } from './types';

export const DEFAULT_MODEL_FILE = path.join('models', 'default.st');

/** The bundled World tokenizer, restricted to the tokens a model has rows for. */
export function tokenizerFor(info: Pick<ModelInfo, 'vocabSize' | 'vocabMap'>): WorldTokenizer {
  const tokenizer = WorldTokenizer.bundled();
  if (info.vocabMap) return tokenizer.restrict(Array.from(info.vocabMap).filter((id) => id !== 0));
  if (info.vocabSize >= tokenizer.vocabSize) return tokenizer;
  // A model with fewer rows than the World vocabulary (and no map) knows only the first ids: prompts,
  // grammar masks and forced tokens must all stay below its size.
  return tokenizer.restrict(Array.from({ length: info.vocabSize - 1 }, (_, i) => i + 1).filter((id) => tokenizer.tokenBytes(id)));
}

/** Where the bundled default model is installed (absolute). */
export function bundledModelPath(): string {
  return path.join(packageRoot(), DEFAULT_MODEL_FILE);
}

/**
 * The model file a config names, absolute; `defaultModel` (the bundled default) when modelPath is unset.
 * `defaultModel` is a parameter so tests can point it at a missing file; users never pass it.
 */
export function resolveModelPath(config: EngineConfig, defaultModel: string = bundledModelPath()): string {
  if (config.modelPath !== undefined && config.modelPath !== null) {
    if (typeof config.modelPath !== 'string' || config.modelPath.trim() === '') throw new Error('modelPath must be a file path');
    return path.resolve(config.modelPath);
  }
  return defaultModel;
}

/** Builds the engine for `config`; `defaultModel` replaces the bundled default's location (tests only). */
export async function createEngine(config: EngineConfig, defaultModel: string = bundledModelPath()): Promise<RwkvEngine> {
  // Every field checked before the model is read or a GPU device is opened.
  checkEngineConfig(config);
  const model = resolveModelPath(config, defaultModel);
  if (!fs.existsSync(model)) {
    throw new Error(
      config.modelPath === undefined
        ? `the bundled default model ${DEFAULT_MODEL_FILE} is not installed (looked at ${model}); set modelPath to a .pth or .st RWKV model`
        : `model file not found: ${model}`,
    );
  }
  const maxBatch = config.maxBatch ?? ENGINE_DEFAULTS.maxBatch;
  const lora = await resolveLoraFiles(config.lora, model);
  // Loaded lazily so that importing the engine API does not start WebGPU.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { createBackend } = require('./backend') as typeof import('./backend');
  const backend = await createBackend({
    model,
    slots: maxBatch,
    precision: config.precision,
    quantLayers: config.quantLayers,
    device: config.device,
    lora,
    adapter: config.adapter,
    maxContext: config.maxContext,
    // One call carries a whole chunk plus a token for every other slot.
    maxTokens: Math.max(config.chunkSize ?? ENGINE_DEFAULTS.chunkSize, config.prefillChunkSize ?? ENGINE_DEFAULTS.prefillChunkSize, 1) + maxBatch,
  });
  try {
    const tokenizer = tokenizerFor(backend.info);
    // Built while the model loads rather than on the first constrained request's event-loop turn.
    prepareConstraintVocabulary(tokenizer);
    const engine = new RwkvEngine({ backend, tokenizer, config });
    if (config.defaultState) {
      try {
        await engine.useDefaultState(config.defaultState);
      } catch (e) {
        await engine.close();
        throw new Error(`the default state of the model configuration cannot be loaded: ${(e as Error).message}`, { cause: e });
      }
    }
    return engine;
  } catch (e) {
    backend.dispose();
    throw e;
  }
}
