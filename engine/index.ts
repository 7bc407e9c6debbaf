// Public API of the engine: the shared per-process engine and everything a host adapter needs.

export type * from './api';
export { acquireEngine, sharedEngineCount, type ClosableEngine, type EngineFactory } from './shared-engine';
export { RwkvEngine, ENGINE_DEFAULTS, type EngineParts, type EngineTokenizer } from './engine';
export { createEngine, resolveModelPath, DEFAULT_MODEL_FILE } from './engine-factory';
export { RequestError, QueueFullError, AbortError, EngineClosedError, StateFileError, RequestCancelledError, type CancelCause } from './errors';
export { AI00_DEFAULTS } from './samplers';
export type { InferenceBackend, ModelInfo, SlotJob, StateSnapshot } from './types';
// Lower layers, for programs that drive the model directly. `createBackend` starts WebGPU only when called.
export { createBackend, type Backend, type BackendOptions } from './backend';
export { WorldTokenizer } from './tokenizer';
export { StreamDecoder } from './stream-decoder';
export { loadCheckpoint } from './loader/checkpoint';
export { describeModel } from './model-spec';
export { compileConstraint, ConstraintError } from './grammar';
