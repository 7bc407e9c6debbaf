// The one small interface the host adapters (n8n, Node-RED) use. Everything here is plain data so
// the nodes never touch GPU or scheduler internals.

import type { Precision } from './precision';

export interface EngineConfig {
  /** Path to a .pth or .st model; undefined = the bundled default model. */
  modelPath?: string;
  /** Weight storage (engine/precision.ts): 'f16' (default), 'f32', 'int8' (per-row scales) or 'nf4' (GPU backend only). */
  precision?: Precision;
  /**
   * With precision 'int8' or 'nf4': how many layers, counting from the first, are quantised (ai00's `quant`);
   * the later layers keep f16 matrices, the head stays quantised. 0 or unset = every layer; at most the model's
   * layer count (checked when the model is read). Refused with 'f16' and 'f32'.
   */
  quantLayers?: number;
  /** Where the model runs: 'auto' (default) = the GPU when a hardware one exists, else the CPU backend. */
  device?: 'auto' | 'gpu' | 'cpu';
  maxBatch?: number;
  /** Tokens per prefill chunk while other slots decode; smaller chunks interleave more finely with decoding. */
  chunkSize?: number;
  /** Tokens per prefill chunk while no slot decodes (at least chunkSize): larger chunks use the GPU better. */
  prefillChunkSize?: number;
  /** One byte bound across the prefix-state caches of all initial states (least recently used evicted first). */
  cacheBytes?: number;
  /** Folder where named initial states and conversation states are looked up and saved. */
  stateDir?: string;
  /**
   * A state file in the state folder (a time_state .st/.pth or a saved conversation) that requests naming no state
   * start from, instead of the model's zero state. Loaded when the engine starts: an engine rebuilt for the same
   * configuration (after a GPU failure, or for another lease) loads it again.
   */
  defaultState?: string;
  /** Bounded queue of requests waiting for a slot. */
  maxQueue?: number;
  /**
   * Shared-prefix state reuse (default true): prompts leave checkpoints in the prefix cache at prefill chunk
   * boundaries and at a request's sharedPrefix, and prompts that share a prefix with one prefilling now wait for
   * its checkpoint instead of computing it again. false: only whole prompts are cached (for comparison).
   */
  prefixReuse?: boolean;
  /** Share of their speed decoding requests keep while a long prompt prefills (0..1, default 0.75). */
  decodeKeep?: number;
  /**
   * Decode steps one GPU call may run back to back, each token drawn on the GPU (0..16, default ENGINE_DEFAULTS
   * .drawSteps; 0 = every token drawn on the host). Used while every running request samples plainly (nucleus or
   * greedy, with bias and presence / frequency penalties; no grammar, log-probabilities or other samplers) and no
   * request waits for a free slot; the next call is queued behind the one being read. A request that arrives waits for
   * the calls in flight; one that ends inside a call leaves its slot holding the tokens drawn after its end (or cleared),
   * so a follow-up prompt does not resume from that slot.
   */
  drawSteps?: number;
  // Operator limits: a request can never exceed them (nothing in a request or message changes them).
  /** Most tokens one generate() may ask for (default 4096); a request above it is refused. */
  maxTokensLimit?: number;
  /**
   * Wall-clock deadline of one request from its submission, queueing included, in ms (default 10 minutes;
   * 0 = none). A request past it is cancelled and fails with RequestTimeoutError.
   */
  requestTimeoutMs?: number;
  /** Most named initial states loaded at once (default 64). */
  maxStates?: number;
  /**
   * Models whose state grows per token (RWKV-7b, whose attention caches every token): most tokens one request's
   * context may hold, initial state and prompt and generated tokens together (default 4096). Each token costs
   * memory in the slot, the prefix cache and state files (README: "what a 7b context costs per token").
   */
  maxContext?: number;
  /**
   * LoRA files merged into the weights at load, in order (engine/lora.ts: ai00 / web-rwkv / RWKV-LM-LoRA layouts);
   * each path is relative to the model file's folder and must stay inside it.
   */
  lora?: { path: string; alpha: number }[];
  /** Which GPU adapter to use: its index in `rwkv-flow adapters`, or a substring of its name. */
  adapter?: number | string;
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
  /** text → additive bias on each token of the text's tokenization (what an editor field can hold). */
  logitBiasText?: Record<string, number>;
  /** Nucleus and typical: drop tokens whose probability is below minP times the most probable one's (0 = off). */
  minP?: number;
  /**
   * Multiplicative repetition penalty (llama.cpp's repeat_penalty) on the tokens generated in the last
   * repetitionWindow steps: a positive logit is divided by it, a negative one multiplied (1 = off). The
   * penalty depends on each logit, so such requests read back the whole logits row instead of the GPU's top.
   */
  repetitionPenalty?: number;
  /** Generated tokens the repetition penalty looks back over (default 64). */
  repetitionWindow?: number;
  seed?: number;
}

export interface GenerateRequest {
  prompt: string;
  /**
   * Length in characters of the start of `prompt` that other requests share (a system or instruction part). It is
   * tokenized on its own and the state after it is kept, so requests with the same start resume from there.
   */
  sharedPrefix?: number;
  maxTokens?: number;
  stop?: string[];
  sampler?: SamplerOptions;
  /** Name of a loaded initial state to start from. */
  state?: string;
  /** Constrained output: KBNF/GBNF grammar text, or a JSON schema object. */
  grammar?: string;
  jsonSchema?: object;
  /** JSON Schema output spacing: 'compact' (default, no whitespace) or 'flexible' (JSON whitespace between tokens). */
  jsonWhitespace?: 'compact' | 'flexible';
  /** Report each generated token's log-probability (delta events) and their mean (stop event). */
  logprobs?: boolean;
  /** Also the this many most probable tokens at each step (0-20; implies logprobs). */
  topLogprobs?: number;
}

/**
 * A generated token's natural-log probability under the distribution it was drawn from: the model's, after
 * logit bias, repetition penalties and a grammar's mask, before temperature and top-k/top-p/typical
 * truncation. A token a grammar forced (no other was allowed) has logprob 0.
 */
export interface TokenLogprob {
  id: number;
  /** The token's text (a token ending inside a UTF-8 character shows U+FFFD). */
  token: string;
  logprob: number;
  /** The most probable tokens at that step, best first (topLogprobs). */
  top?: { id: number; token: string; logprob: number }[];
}

export type GenerateEvent =
  | { type: 'queued'; position: number }
  | { type: 'start'; promptTokens: number; cachedTokens: number }
  | { type: 'prefill'; done: number; total: number }
  | { type: 'delta'; text: string; tokens: number[]; /** One per token, with logprobs requested. */ logprobs?: TokenLogprob[] }
  | {
      type: 'stop';
      reason: 'stop' | 'length' | 'eos' | 'abort' | 'grammar';
      /**
       * With reason 'abort': why. 'cancelled' (a cancel message for this request), 'disconnected' (its HTTP caller
       * went away), 'closed' (its node closed) when the caller's signal says so with a RequestCancelledError; else
       * 'abort'. (Past requestTimeoutMs the stream fails with RequestTimeoutError instead.)
       */
      cause?: 'cancelled' | 'disconnected' | 'closed' | 'abort';
      text: string;
      /** Parsed JSON when jsonSchema was given. */
      json?: unknown;
      /** With logprobs requested: the mean log-probability of the generated tokens (a confidence summary). */
      meanLogprob?: number;
      promptTokens: number;
      completionTokens: number;
      timing: { queueMs: number; prefillMs: number; decodeMs: number; totalMs: number };
    };

export type EmbedPooling = 'last' | 'mean';

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
  /**
   * The hidden vector (channel-mix input) at a layer: of the last token ('last', default) or averaged over
   * the text's tokens ('mean', one step per token).
   */
  embed(text: string, opts?: { layer?: number; state?: string; pooling?: EmbedPooling; signal?: AbortSignal }): Promise<Float32Array>;
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
