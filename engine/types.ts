// Shared types between the parts of the engine. Kept free of any GPU or host import so that
// the loader, tokenizer, scheduler and nodes can all depend on it.

/** Weights are f32/f16/bf16; 'i32' appears only for index tensors such as the optional `vocab_map`. */
export type DType = 'f32' | 'f16' | 'bf16' | 'i32';

/** One tensor as found in a checkpoint: raw little-endian bytes, row-major. */
export interface RawTensor {
  name: string;
  dtype: DType;
  shape: number[];
  /** Exactly product(shape) * bytesPerElement bytes. */
  bytes: Uint8Array;
}

/** A checkpoint read from disk (or made in memory), before any model interpretation. */
export interface Checkpoint {
  format: 'pth' | 'safetensors' | 'memory';
  tensors: Map<string, RawTensor>;
  /** safetensors __metadata__ (string → string), empty for .pth. */
  metadata: Record<string, string>;
}

/** 'v7a': RWKV-7 with DeepEmbed (per-layer token tables gating the channel mix); 'v7b': 7a plus DEA attention. */
export type RwkvVersion = 'v4' | 'v5' | 'v6' | 'v7' | 'v7a' | 'v7b';

/** Model hyper-parameters derived from the tensor names and shapes. */
export interface ModelInfo {
  version: RwkvVersion;
  nLayer: number;
  nEmbd: number;
  nHead: number;
  headSize: number;
  vocabSize: number;
  ffnDim: number;
  /** LoRA ranks of RWKV-7 (decay, a, value-residual, gate). */
  loraDims: { w: number; a: number; v: number; g: number };
  /**
   * Optional map from the model's row index to a World token id, for models trained on a reduced
   * vocabulary (tensor `vocab_map`, i32). Absent: row i is World token i.
   */
  vocabMap?: Int32Array;
}

/**
 * Which logits a slot wants back from one `run`: the last token's row ('last'), every token's ('all'),
 * nothing ('none'), or the last row reduced on the GPU to its largest entries ('top', see TopLogits).
 */
export type OutputMode = 'last' | 'all' | 'none' | 'top';

/** Sparse additions to a logits row (logit bias, repetition penalties); rows must be distinct. */
export interface LogitAdjust {
  rows: Int32Array;
  deltas: Float32Array;
  /**
   * Rows allowed (bit r % 32 of word r >> 5, ceil(vocab / 32) words); the others become -Infinity before the
   * reduction. A grammar's mask: the top is then the top of the allowed rows, and sampling from it stays exact.
   */
  allowed?: Uint32Array;
}

export interface SlotJob<O extends OutputMode = OutputMode> {
  slot: number;
  /** Tokens (model row indices) to feed, in order. May be empty only with output 'none'. */
  tokens: ArrayLike<number>;
  output: O;
  /** Output 'top' only: added to the last row before it is reduced. */
  adjust?: LogitAdjust;
}

/**
 * A logits row reduced on the GPU (output 'top'), after its LogitAdjust: the `capacity` largest entries
 * (all finite ones when fewer), best first with ties by lower row, plus the softmax normalizer over the
 * whole row. Sampling from these is exact for greedy and for nucleus with top_k <= capacity, and the
 * read-back is a few KiB instead of the vocabulary.
 */
export interface TopLogits {
  readonly kind: 'top';
  rows: Int32Array;
  logits: Float32Array;
  /** Largest logit of the row (-Infinity when none is finite). */
  max: number;
  /** ln of sum(exp(logit - max)) over every finite logit of the row. */
  logZ: number;
  /** Finite logits in the whole row. */
  finite: number;
}

/**
 * How a decode row's next tokens are drawn on the GPU (InferenceBackend.runDraws): plain nucleus or greedy over the
 * row's 'top' result, with logit bias and presence / frequency penalties kept on the GPU from step to step.
 */
export interface DrawParams {
  /** 0: greedy. */
  temperature: number;
  /** 1..topCapacity (ignored when greedy). */
  topK: number;
  topP: number;
  presence: number;
  frequency: number;
  decay: number;
  /** Logit bias (model rows, additive); rows distinct. */
  bias: { rows: Int32Array; values: Float32Array };
  /** Rows penalised so far and their current penalties (subtracted); rows distinct. */
  penalties: { rows: Int32Array; values: Float32Array };
}

/** Most steps one runDraws call may take (EngineConfig.drawSteps is bounded by it). */
export const MAX_DRAW_STEPS = 16;
/** Steps the GPU runtimes let continueDraws add after one runDraws call (the penalty room a call reserves). */
export const DRAW_CONTINUATION_STEPS = 256;

/** One slot of a runDraws call: its next token (a model row) and how each step's token is drawn. */
export interface DrawJob {
  slot: number;
  token: number;
  draw: DrawParams;
  /** One uniform draw in [0, 1) per step, the values the host sampler would have used. */
  uniforms: Float32Array;
}

/** What `run` gives back for one job: logits ('last', 'all'), a TopLogits ('top') or null ('none'). */
export type JobResult = Float32Array | TopLogits | null;

/**
 * The state of one slot copied to the CPU: all layers, f32, in the layout of `stateLayout`.
 * For RWKV-7, per layer: att_x [C], att_kv [H, N(value), N(key)], ffn_x [C].
 * A backend whose state grows (stateRowFloats > 0, RWKV-7b) appends one row of stateRowFloats per cached token
 * after those stateSize floats: a snapshot is stateSize + rows × stateRowFloats floats (engine/state-shape.ts).
 */
export type StateSnapshot = Float32Array;

/**
 * The batched forward pass over a fixed number of slots, each with its own recurrent state.
 * Implemented by the WebGPU runtime; the scheduler depends only on this.
 */
export interface InferenceBackend {
  readonly info: ModelInfo;
  readonly slots: number;
  /** Floats in one slot's state; with a growing state, its fixed part (the state of zero cached rows). */
  readonly stateSize: number;
  /**
   * Floats each token adds to a slot's state (RWKV-7b's attention cache: one row per token since the zero state);
   * 0 or absent: the state has a fixed size. Snapshots, the prefix cache and state files carry the rows
   * (engine/state-shape.ts), so nothing outside the backend knows which versions grow.
   */
  readonly stateRowFloats?: number;
  /** With a growing state: most rows one slot may hold (the operator's context limit); a run past it is refused. */
  readonly maxStateRows?: number;
  /**
   * Bytes readState(slot) would give once the calls made so far have run: 4·stateSize for a fixed-size state
   * (the default when absent), more as a growing state's rows accumulate. The scheduler asks before reading a
   * state for the prefix cache, so a context that outweighs the cache is never read back for it.
   */
  stateBytes?(slot: number): number;
  /** The model's default initial state when it embeds one (time_state); absent or null = the zero state. */
  readonly defaultState?: Float32Array | null;
  /**
   * Advance any subset of slots by any number of tokens in one batched pass (one GPU round trip).
   * Result i belongs to jobs[i]: logits [vocab] for 'last', [n*vocab] for 'all', null for 'none',
   * a TopLogits for 'top'. Results may be views into one buffer per call: copy one before keeping it
   * beyond the step.
   */
  run(jobs: SlotJob<Exclude<OutputMode, 'top'>>[]): Promise<(Float32Array | null)[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]>;
  /**
   * Most steps one runDraws call may take; absent or 0: the backend cannot draw on the GPU. runDraws(jobs, steps)
   * feeds each job's token, then runs `steps` decode steps back to back without the host: each step reduces every
   * row to its 'top', draws the row's next token on the GPU and feeds it to the next step. The result holds the
   * drawn rows, step-major (rows[s * jobs.length + j]), -1 where a row allowed no token; all but the last step's
   * drawn rows have been fed to their slots when it resolves.
   */
  readonly maxDrawSteps?: number;
  runDraws?(jobs: DrawJob[], steps: number): Promise<Int32Array>;
  /**
   * continueDraws(uniforms, steps) runs `steps` more steps for the jobs of the last draw call, in its order, each fed
   * the row it drew last, its penalties as the GPU left them; uniforms[j] holds job j's `steps` uniforms. It may be
   * called before that call has resolved (its steps queue behind it on the GPU, so the host reads one call while the
   * GPU runs the next), but nothing else may come between: no other call and no state change. Up to
   * drawContinuationSteps steps in all may continue one runDraws call.
   */
  readonly drawContinuationSteps?: number;
  continueDraws?(uniforms: Float32Array[], steps: number): Promise<Int32Array>;
  /** Entries a 'top' result holds; 0 when the backend has no 'top' output. */
  readonly topCapacity?: number;
  /**
   * `fixedOnly`: only the fixed part (stateSize floats) of a growing state, for readers that look at a layer's
   * vectors after every token (mean pooling) and must not copy every cached row each time; ignored when fixed.
   */
  readState(slot: number, opts?: { fixedOnly?: boolean }): Promise<StateSnapshot>;
  /**
   * Takes effect for the calls made after it. The snapshot must stay unchanged: a backend may read it after
   * returning (the GPU runtime uploads a growing state's rows a piece at a time, with event-loop turns between).
   */
  writeState(slot: number, state: StateSnapshot): void;
  resetState(slot: number): void;
  copyState(fromSlot: number, toSlot: number): void;
  dispose(): void;
  /** Why the backend can no longer run (its GPU device was lost or hit an uncaptured error); null while healthy. */
  readonly lost?: string | null;
  /** Calls `fn` once, with that reason, when the backend breaks (so requests fail without waiting on a call). */
  onBroken?(fn: (reason: string) => void): void;
}
