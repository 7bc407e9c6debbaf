// The one small interface the host adapters (n8n, Node-RED) use. Everything here is plain data so
// the nodes never touch GPU or scheduler internals.

export interface EngineConfig {
  /** Path to a .pth or .st model; undefined = the bundled default model. */
  modelPath?: string;
  precision?: 'f16' | 'f32';
  /** Where the model runs: 'auto' (default) = the GPU when a hardware one exists, else the CPU backend. */
  device?: 'auto' | 'gpu' | 'cpu';
  maxBatch?: number;
  /** Tokens per prefill chunk while other slots decode; smaller chunks interleave more finely with decoding. */
  chunkSize?: number;
  /** Tokens per prefill chunk while no slot decodes (at least chunkSize): larger chunks use the GPU better. */
  prefillChunkSize?: number;
  /** Byte bound of the prefix-state cache (per initial state). */
  cacheBytes?: number;
  /** Folder where named initial states and conversation states are looked up and saved. */
  stateDir?: string;
  /** Bounded queue of requests waiting for a slot. */
  maxQueue?: number;
  /** Share of their speed decoding requests keep while a long prompt prefills (0..1, default 0.75). */
  decodeKeep?: number;
}

export interface SamplerOptions {
  kind?: 'nucleus' | 'typical' | 'mirostat';
  temperature?: number;
  topP?: number;
  topK?: number;
  /** ai00 penalties: presence, frequency, and the decay of token counts per step. */
  presencePenalty?: number;
  frequencyPenalty?: number;
  penaltyDecay?: number;
  /** typical sampling mass. */
  tau?: number;
  /** mirostat target surprise and learning rate. */
  mirostatTau?: number;
  mirostatEta?: number;
  /** token id → additive bias (World ids). */
  logitBias?: Record<number, number>;
  seed?: number;
}

export interface GenerateRequest {
  prompt: string;
  maxTokens?: number;
  stop?: string[];
  sampler?: SamplerOptions;
  /** Name of a loaded initial state to start from. */
  state?: string;
  /** Constrained output: KBNF/GBNF grammar text, or a JSON schema object. */
  grammar?: string;
  jsonSchema?: object;
}

export type GenerateEvent =
  | { type: 'queued'; position: number }
  | { type: 'start'; promptTokens: number; cachedTokens: number }
  | { type: 'prefill'; done: number; total: number }
  | { type: 'delta'; text: string; tokens: number[] }
  | {
      type: 'stop';
      reason: 'stop' | 'length' | 'eos' | 'abort' | 'grammar';
      text: string;
      /** Parsed JSON when jsonSchema was given. */
      json?: unknown;
      promptTokens: number;
      completionTokens: number;
      timing: { queueMs: number; prefillMs: number; decodeMs: number; totalMs: number };
    };

export interface ChooseResult {
  /** Sorted best first. */
  ranking: { choice: string; index: number; perplexity: number; logProb: number; tokens: number }[];
}

export interface StateInfo {
  name: string;
  /** Where it came from (file path or 'buffer'). */
  source: string;
  bytes: number;
}

export interface Engine {
  readonly modelInfo: { version: string; nLayer: number; nEmbd: number; vocabSize: number; adapter: string };
  generate(req: GenerateRequest, opts?: { signal?: AbortSignal }): AsyncIterable<GenerateEvent>;
  choose(
    prompt: string,
    choices: string[],
    opts?: { calibrate?: boolean; state?: string; signal?: AbortSignal },
  ): Promise<ChooseResult>;
  embed(text: string, opts?: { layer?: number; state?: string; signal?: AbortSignal }): Promise<Float32Array>;
  loadState(name: string, source: string | Uint8Array): Promise<StateInfo>;
  unloadState(name: string): void;
  listStates(): StateInfo[];
  /** Conversation state: prompt run through the model, saved as CBOR. */
  saveConversation(prompt: string, file: string, opts?: { state?: string }): Promise<{ bytes: number; tokens: number }>;
  loadConversation(file: string, name: string): Promise<StateInfo>;
}

/** Lease on the per-process shared engine; release() when the node closes. */
export interface EngineLease {
  engine: Engine;
  release(): Promise<void>;
}
