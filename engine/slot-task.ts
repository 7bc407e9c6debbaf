// What the scheduler runs in a slot. A task is a prompt to prefill (from an initial state) and
// then a dialogue: after each batch the task sees its logits and says what to feed next.
// generate, choose, embed and saveConversation are all tasks.

import type { DrawParams, JobResult, LogitAdjust, OutputMode, StateSnapshot } from './types';
import type { InitialState } from './initial-states';

export interface Feed {
  /** Model rows to feed, at least one. */
  tokens: number[];
  output: OutputMode;
  /** With output 'top' (one token): added to the logits row before it is reduced. */
  adjust?: LogitAdjust;
  /** Read the slot's state once these tokens are in and pass it to onFed (per-token states for mean pooling). */
  readState?: boolean;
}

export interface TaskStart {
  slot: number;
  promptTokens: number;
  /** Tokens taken from the prefix cache or from the slot's retained state. */
  cachedTokens: number;
}

export interface SlotTask {
  readonly initial: InitialState;
  /** Model rows; may be empty only when the initial state carries logits. */
  readonly prompt: readonly number[];
  readonly signal?: AbortSignal;
  /** Read the slot's state when the prompt is in (embed, saveConversation). */
  readonly wantsState?: boolean;
  /** The states it reads are only looked at in their fixed part (a layer's vectors): a growing state's rows are not read. */
  readonly fixedStateOnly?: boolean;
  /** 'auto': cache prompts of at least the engine's minimum length. */
  readonly cachePrompt?: 'auto' | 'always' | 'never';
  /**
   * Prompt positions where the caller marked the end of a shared part (a system or instruction text): prefill
   * chunks end there and the state is kept in the prefix cache, so prompts sharing that part resume from it.
   */
  readonly checkpoints?: readonly number[];

  onQueued?(position: number): void;
  onStart?(info: TaskStart): void;
  onPrefillProgress?(done: number, total: number): void;
  /**
   * The whole prompt is in the slot. `logits` (read-only) follow its last token. Return what to
   * feed next, or null when the task is done (the slot frees at once).
   */
  onPrefilled(logits: Float32Array, state: StateSnapshot | null): Feed | null;
  /**
   * The previous Feed ran: its result per output mode ('all': n*vocab logits, 'top': TopLogits, 'none': null),
   * and the slot's state after it when the Feed asked for it (readState).
   */
  onFed(result: JobResult, state?: StateSnapshot): Feed | null;
  /**
   * Draws on the GPU (InferenceBackend.runDraws), for a task whose next Feed is one token with output 'top': how its
   * next tokens would be drawn, or null when only the host can draw them (grammar, log-probabilities, samplers the
   * GPU lacks). Absent: never.
   */
  drawParams?(): DrawParams | null;
  /** Tokens it may still take: a draw call runs no more steps than this for it. */
  drawBudget?(): number;
  /** One uniform per step of a draw call, from its sampler's stream. */
  takeUniforms?(steps: number): Float32Array;
  /** The rows one draw call drew for it, in order (-1: nothing was allowed). Returns what to feed next, as onFed. */
  onDrawn?(rows: Int32Array): Feed | null;
  /** Ended by its AbortSignal (queued or running). */
  onAbort(): void;
  /** Ended by an error (its own callback threw, the backend failed, or the engine closed). */
  onError(error: Error): void;
}
