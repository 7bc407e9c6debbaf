// Public API of the engine: the shared per-process engine and everything a host adapter needs.

export type * from './api';
export { acquireEngine, sharedEngineCount, type ClosableEngine, type EngineFactory } from './shared-engine';
export { RwkvEngine, ENGINE_DEFAULTS, type EngineParts, type EngineTokenizer } from './engine';
export { createEngine, resolveModelPath, DEFAULT_MODEL_FILE } from './engine-factory';
export { RequestError, QueueFullError, AbortError, EngineClosedError, StateFileError } from './errors';
export { AI00_DEFAULTS } from './samplers';
export type { InferenceBackend, ModelInfo, SlotJob, StateSnapshot } from './types';
