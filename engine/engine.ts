// The Engine of api.ts over one model: tokenizes, validates, builds slot tasks and hands them to
// the continuous-batching scheduler. Host adapters use it through shared-engine.ts.

import type {
  ChooseResult,
  EmbedPooling,
  Engine,
  EngineConfig,
  GenerateEvent,
  GenerateRequest,
  StateInfo,
} from './api';
import { loadConstraintCompiler, type CompiledConstraintLike, type ConstraintCompiler } from './constraint';
import {
  CONVERSATION_HEAD_BYTES,
  encodeConversationParts,
  isConversationHead,
  MAX_CONVERSATION_TOKENS,
  modelSignature,
} from './conversation-file';
import { AbortError, EngineClosedError, QueueFullError, RequestCancelledError, RequestError } from './errors';
import { setMaxListeners } from 'events';
import { EventChannel } from './event-channel';
import { END_OF_TEXT, GenerateTask } from './generate-task';
import { DEFAULT_MAX_STATES, InitialStateRegistry, type InitialState } from './initial-states';
import { MeanStateTask, ScoreTask, StateTask, WarmTask } from './promise-task';
import { MAX_TIMEOUT_MS, RequestDeadline, RequestTimeoutError } from './request-deadline';
import { checkGenerateRequest, checkText, DEFAULT_MAX_TOKENS, MAX_MAX_TOKENS } from './request-validation';
import { contextRoom, contextUse, snapshotRows } from './state-shape';
import { resolveSamplerOptions, TokenSampler } from './samplers';
import { Scheduler, type SchedulerStats } from './scheduler';
import { readStateSource } from './state-file';
import { checkStatePath, StateFolder } from './state-folder';
import { stateLayout } from './state-layout';
import type { InferenceBackend } from './types';
import { VocabMapping } from './vocab-mapping';

/** What the engine needs from a tokenizer (WorldTokenizer fits). Ids are World ids. */
export interface EngineTokenizer {
  encode(text: string): number[];
  decodeBytes(ids: ArrayLike<number>): Uint8Array;
}

/** Mean pooling reads the state once per token: longer texts would hold a slot for thousands of steps. */
export const MAX_MEAN_POOLING_TOKENS = 8192;

export const ENGINE_DEFAULTS = {
  maxBatch: 8,
  // H200, 1.5B: 256-token chunks prefill a prompt 1.4-2x faster than 128 at the same paced decode share, and a
  // 512-token chunk alone prefills at 7.0k tok/s against 3.9k for 128 (bench/RESULTS.md runs 5, 10, 11).
  chunkSize: 256,
  prefillChunkSize: 512,
  cacheBytes: 512 * 1024 * 1024,
  maxQueue: 1024,
  cacheMinTokens: 64,
  // Operator limits (EngineConfig): generous for flows, bounded for a webhook anyone can call.
  maxTokensLimit: 4096,
  requestTimeoutMs: 10 * 60 * 1000,
  maxStates: DEFAULT_MAX_STATES,
  drawSteps: 4,
} as const;

/** What a server reports about an engine: the scheduler's counters and how busy it is now (engine/server/metrics.ts). */
export interface EngineMetrics extends SchedulerStats {
  /** Requests waiting for a slot. */
  queued: number;
  /** Slots running a request. */
  active: number;
  slots: number;
}

export interface EngineParts {
  backend: InferenceBackend & { adapterName?: string };
  tokenizer: EngineTokenizer;
  config?: EngineConfig;
  /** Prompts at least this long are cached after prefill. */
  cacheMinTokens?: number;
  /** Grammar compiler; default: the grammar module when present. */
  compileConstraint?: ConstraintCompiler | null;
}

export class RwkvEngine implements Engine {
  readonly modelInfo: Engine['modelInfo'];
  readonly scheduler: Scheduler;
  private readonly backend: EngineParts['backend'];
  private readonly tokenizer: EngineTokenizer;
  private readonly mapping: VocabMapping;
  private readonly states: InitialStateRegistry;
  private readonly stateFolder: StateFolder;
  private readonly compileConstraint: ConstraintCompiler | null;
  private readonly maxTokensLimit: number;
  private readonly requestTimeoutMs: number;
  private closed = false;
  private brokenReason: string | null = null;

  constructor(parts: EngineParts) {
    const config = parts.config ?? {};
    this.backend = parts.backend;
    this.tokenizer = parts.tokenizer;
    const info = parts.backend.info;
    this.mapping = new VocabMapping(info);
    this.modelInfo = {
      version: info.version,
      nLayer: info.nLayer,
      nEmbd: info.nEmbd,
      vocabSize: info.vocabSize,
      adapter: parts.backend.adapterName ?? 'unknown',
    };
    const cacheBytes = config.cacheBytes ?? ENGINE_DEFAULTS.cacheBytes;
    if (!(cacheBytes >= 0)) throw new RangeError(`cacheBytes must be >= 0, got ${cacheBytes}`);
    this.maxTokensLimit = config.maxTokensLimit ?? ENGINE_DEFAULTS.maxTokensLimit;
    if (!Number.isInteger(this.maxTokensLimit) || this.maxTokensLimit < 1 || this.maxTokensLimit > MAX_MAX_TOKENS) {
      throw new RangeError(`maxTokensLimit must be an integer in [1, ${MAX_MAX_TOKENS}], got ${config.maxTokensLimit}`);
    }
    this.requestTimeoutMs = config.requestTimeoutMs ?? ENGINE_DEFAULTS.requestTimeoutMs;
    if (!Number.isInteger(this.requestTimeoutMs) || this.requestTimeoutMs < 0 || this.requestTimeoutMs > MAX_TIMEOUT_MS) {
      throw new RangeError(`requestTimeoutMs must be an integer in [0, ${MAX_TIMEOUT_MS}] (0 = none), got ${config.requestTimeoutMs}`);
    }
    this.states = new InitialStateRegistry(parts.backend, cacheBytes, config.maxStates ?? ENGINE_DEFAULTS.maxStates, parts.backend.defaultState ?? null);
    this.scheduler = new Scheduler(parts.backend, {
      chunkSize: config.chunkSize ?? ENGINE_DEFAULTS.chunkSize,
      prefillChunkSize: config.prefillChunkSize ?? ENGINE_DEFAULTS.prefillChunkSize,
      maxQueue: config.maxQueue ?? ENGINE_DEFAULTS.maxQueue,
      cacheMinTokens: parts.cacheMinTokens ?? ENGINE_DEFAULTS.cacheMinTokens,
      decodeKeep: config.decodeKeep,
      prefixReuse: config.prefixReuse,
      drawSteps: config.drawSteps ?? ENGINE_DEFAULTS.drawSteps,
    });
    this.stateFolder = new StateFolder(config.stateDir);
    this.compileConstraint = parts.compileConstraint === undefined ? loadConstraintCompiler() : parts.compileConstraint;
    parts.backend.onBroken?.((reason) => this.fail(reason));
  }

  /**
   * The GPU broke (device lost, uncaptured WebGPU error): every queued and running request fails now with the
   * reason, the GPU resources are freed, and the shared registry builds a new engine on the next use.
   */
  private fail(reason: string): void {
    if (this.brokenReason) return;
    this.brokenReason = reason;
    this.scheduler.fail(new EngineClosedError(`the engine stopped: ${reason} (it is rebuilt on the next request)`));
    // Not from inside Dawn's callback that told us: destroying the device there would re-enter it.
    setImmediate(() => this.backend.dispose());
  }

  get stats(): SchedulerStats {
    return this.scheduler.stats;
  }

  metrics(): EngineMetrics {
    return { ...this.scheduler.stats, queued: this.scheduler.queued, active: this.scheduler.active, slots: this.scheduler.pool.slots.length };
  }

  // ---- generate ------------------------------------------------------------------------------------

  generate(req: GenerateRequest, opts: { signal?: AbortSignal } = {}): AsyncIterable<GenerateEvent> {
    this.checkOpen();
    const checked = checkGenerateRequest(req, this.maxTokensLimit);
    const initial = this.states.resolve(req.state ?? undefined);
    const { prompt, checkpoints } = this.sharedPromptRows(checked.prompt, req.sharedPrefix, initial);
    // A state that grows per token (RWKV-7b) bounds the whole context: a request that leaves maxTokens out gets
    // what room is left, one that asks for more than is left is refused with the numbers.
    const room = contextRoom(this.backend, initial.state, prompt.length);
    const setByRequest = req.maxTokens !== undefined && req.maxTokens !== null;
    // Named in the refusal of a grammar too long for the budget, which the caller did not set.
    let maxTokensOrigin = setByRequest
      ? undefined
      : `The default budget of ${checked.maxTokens} tokens (the request set no maxTokens; min(${DEFAULT_MAX_TOKENS}, maxTokensLimit ${this.maxTokensLimit}))`;
    if (checked.maxTokens > room) {
      if (setByRequest)
        throw new RequestError(
          `maxTokens ${checked.maxTokens} after a prompt of ${prompt.length} tokens passes this model's context limit: ${room} tokens are left ` +
            `(its state grows per token; maxContext in the engine config)`,
        );
      checked.maxTokens = room;
      maxTokensOrigin = `A budget of ${room} tokens, what the context limit leaves (${contextUse(this.backend, initial.state, prompt.length)}; the request set no maxTokens),`;
    }
    const options = resolveSamplerOptions(req.sampler, (id) => this.mapping.worldToRow(id) >= 0, (text) => this.tokenizer.encode(text));
    const sampler = new TokenSampler(options, this.mapping.rows, (id) => this.mapping.worldToRow(id));
    // The constraint compiles off the event loop (a worker) while generate() returns; the request
    // is queued only once it compiled, and a compile error is the iterator's error.
    let constraint: CompiledConstraintLike | Promise<CompiledConstraintLike> | null = null;
    if (req.grammar || req.jsonSchema) {
      if (!this.compileConstraint) throw new RequestError('grammar and jsonSchema need the grammar module, which is not available in this build');
      constraint = this.compileConstraint({ grammar: req.grammar || undefined, jsonSchema: req.jsonSchema || undefined, jsonWhitespace: req.jsonWhitespace }, this.tokenizer);
      if (constraint instanceof Promise) constraint.catch(() => {}); // observed in stream(); never unhandled
    }
    const build = (signal: AbortSignal, channel: EventChannel<GenerateEvent>, compiled: CompiledConstraintLike | null) =>
      new GenerateTask({
        initial,
        prompt,
        checkpoints,
        signal,
        sampler,
        stop: checked.stop,
        maxTokens: checked.maxTokens,
        maxTokensOrigin,
        mapping: this.mapping,
        decodeBytes: (ids) => this.tokenizer.decodeBytes(ids),
        constraint: compiled,
        parseJson: !!req.jsonSchema && !!compiled,
        channel,
        topCapacity: this.backend.topCapacity ?? 0,
        topLogprobs: checked.topLogprobs,
      });
    return this.stream(build, constraint, opts.signal);
  }

  /**
   * Submits on first iteration, once the constraint compiled; leaving the loop early cancels the request and frees
   * its slot. Past the deadline the request is cancelled like an abort, and the stream fails with RequestTimeoutError.
   */
  private async *stream(
    build: (signal: AbortSignal, channel: EventChannel<GenerateEvent>, constraint: CompiledConstraintLike | null) => GenerateTask,
    constraint: CompiledConstraintLike | Promise<CompiledConstraintLike> | null,
    outer: AbortSignal | undefined,
  ): AsyncGenerator<GenerateEvent> {
    const controller = new AbortController();
    const deadline = new RequestDeadline(this.requestTimeoutMs, outer);
    const forward = () => controller.abort();
    if (deadline.signal.aborted) controller.abort();
    deadline.signal.addEventListener('abort', forward, { once: true });
    const channel = new EventChannel<GenerateEvent>();
    try {
      const compiled = await untilAborted(constraint, controller.signal);
      // Aborted while compiling: the task only reports the abort (no constraint needed for that).
      const task = build(controller.signal, channel, controller.signal.aborted ? null : compiled);
      if (controller.signal.aborted) task.onAbort();
      else this.scheduler.submit(task);
      for await (const event of channel) {
        if (event.type === 'stop' && event.reason === 'abort') {
          if (deadline.expired) {
            // The output so far goes with the error, so a caller can still use or show it.
            const timeout = deadline.explain(null) as RequestTimeoutError;
            timeout.partial = { reason: 'timeout', text: event.text, promptTokens: event.promptTokens, completionTokens: event.completionTokens };
            throw timeout;
          }
          const why = outer?.reason;
          yield { ...event, cause: why instanceof RequestCancelledError ? why.cancelCause : 'abort' };
          continue;
        }
        yield event;
      }
    } finally {
      deadline.signal.removeEventListener('abort', forward);
      deadline.dispose();
      controller.abort();
    }
  }

  // ---- choose --------------------------------------------------------------------------------------

  async choose(
    prompt: string,
    choices: string[],
    opts: { calibrate?: boolean; state?: string; signal?: AbortSignal } = {},
  ): Promise<ChooseResult> {
    this.checkOpen();
    checkText(prompt, 'prompt');
    if (!Array.isArray(choices) || choices.length === 0) throw new RequestError('choices must be a non-empty array of strings');
    if (choices.length > 1024) throw new RequestError(`at most 1024 choices, got ${choices.length}`);
    // Every choice is scored as its own queued task, all at once: more than the queue can ever hold would
    // always fail part-way.
    const capacity = this.scheduler.options.maxQueue + this.scheduler.pool.slots.length;
    if (choices.length > capacity) {
      throw new RequestError(
        `${choices.length} choices are more than this engine can queue at once (${capacity}: maxQueue ${this.scheduler.options.maxQueue} + ${this.scheduler.pool.slots.length} slots); give fewer choices or raise maxQueue`,
      );
    }
    const rows = choices.map((c, i) => {
      if (typeof c !== 'string' || c.length === 0) throw new RequestError(`choices[${i}] must be a non-empty string`);
      return this.rows(c, `choices[${i}]`);
    });
    const initial = this.states.resolve(opts.state);
    // With nothing to condition on, end-of-text is the document start the model was trained with.
    const context = this.promptRows(prompt, initial, true);
    // Each choice is scored after the context: the longest must fit a growing state's context limit too.
    contextRoom(this.backend, initial.state, context.length + Math.max(...rows.map((r) => r.length)), 0);
    const endOfText = opts.calibrate ? this.endOfTextRow() : 0;
    const { scores, baseline } = await new RequestDeadline(this.requestTimeoutMs, opts.signal).run(async (signal) => ({
      scores: await this.scoreAll(initial, context, rows, signal),
      baseline: opts.calibrate ? await this.scoreAll(this.states.zero, [endOfText], rows, signal) : null,
    }));
    const ranking = choices.map((choice, index) => {
      const n = rows[index].length;
      const logProb = scores[index] - (baseline ? baseline[index] : 0);
      return { choice, index, perplexity: Math.exp(-logProb / n), logProb, tokens: n };
    });
    ranking.sort((a, b) => a.perplexity - b.perplexity || a.index - b.index);
    return { ranking };
  }

  private async scoreAll(initial: InitialState, context: number[], rows: number[][], signal: AbortSignal): Promise<number[]> {
    // Prefill the shared context once (cached), then score every choice in parallel from the cache.
    if (context.length > 0) {
      const warm = new WarmTask(initial, context, signal);
      this.scheduler.submit(warm);
      await warm.promise;
    }
    // The parts stand or fall together: all are queued or none, and the first failure cancels the rest.
    const room = this.scheduler.options.maxQueue + this.scheduler.pool.idleCount - this.scheduler.queued;
    if (rows.length > room) throw new QueueFullError(this.scheduler.options.maxQueue);
    const parts = new AbortController();
    // Every row's task listens on this one signal (the scheduler removes each listener when its task ends): many
    // choices are not a leak, so Node must not print its leak warning into the host's log for them.
    setMaxListeners(rows.length + 10, parts.signal);
    const forward = () => parts.abort();
    if (signal.aborted) parts.abort();
    else signal.addEventListener('abort', forward, { once: true });
    const tasks = rows.map((r) => new ScoreTask(initial, context, r, this.mapping.rows, parts.signal));
    try {
      for (const t of tasks) this.scheduler.submit(t);
      return await Promise.all(tasks.map((t) => t.promise.catch((err) => (parts.abort(), Promise.reject(err)))));
    } catch (err) {
      parts.abort();
      throw err;
    } finally {
      signal.removeEventListener('abort', forward);
    }
  }

  // ---- embed / conversation state -------------------------------------------------------------------

  async embed(text: string, opts: { layer?: number; state?: string; pooling?: EmbedPooling; signal?: AbortSignal } = {}): Promise<Float32Array> {
    this.checkOpen();
    checkText(text, 'text');
    const info = this.backend.info;
    let layer = opts.layer ?? info.nLayer - 1;
    if (!Number.isInteger(layer) || layer < -info.nLayer || layer >= info.nLayer) {
      throw new RequestError(`layer must be an integer in [${-info.nLayer}, ${info.nLayer - 1}], got ${JSON.stringify(opts.layer)}`);
    }
    if (layer < 0) layer += info.nLayer;
    if (opts.pooling !== undefined && opts.pooling !== 'last' && opts.pooling !== 'mean') {
      throw new RequestError(`pooling must be "last" or "mean", got ${JSON.stringify(opts.pooling)}`);
    }
    const initial = this.states.resolve(opts.state);
    const prompt = this.promptRows(text, initial);
    // The channel-mix input of the last token at that layer: the model's summary of the text there.
    const part = stateLayout(info)[layer].ffn_x;
    if (opts.pooling === 'mean' && prompt.length > 1) {
      if (prompt.length > MAX_MEAN_POOLING_TOKENS) {
        throw new RequestError(`text is ${prompt.length} tokens; mean pooling takes at most ${MAX_MEAN_POOLING_TOKENS} (one step per token)`);
      }
      return new RequestDeadline(this.requestTimeoutMs, opts.signal).run((signal) => {
        const task = new MeanStateTask(initial, prompt, part, signal);
        this.scheduler.submit(task);
        return task.promise;
      });
    }
    const { state } = await new RequestDeadline(this.requestTimeoutMs, opts.signal).run((signal) => this.runStateTask(initial, prompt, signal));
    return state.slice(part.offset, part.offset + part.length);
  }

  async saveConversation(prompt: string, file: string, opts: { state?: string } = {}): Promise<{ bytes: number; tokens: number }> {
    this.checkOpen();
    checkText(prompt, 'prompt');
    checkStatePath(file); // a bad path fails before the prompt takes a slot
    const initial = this.states.resolve(opts.state);
    const tokens = this.promptRows(prompt, initial);
    // What is saved must load back within the conversation file's bound.
    if (tokens.length > MAX_CONVERSATION_TOKENS) {
      throw new RequestError(`prompt is ${tokens.length} tokens; a saved conversation holds at most ${MAX_CONVERSATION_TOKENS}`);
    }
    const { state, logits } = await new RequestDeadline(this.requestTimeoutMs).run((signal) => this.runStateTask(initial, tokens, signal));
    const parts = encodeConversationParts({
      model: modelSignature(this.backend.info),
      initialState: initial.name,
      tokens: Int32Array.from(tokens),
      state,
      stateRows: snapshotRows(this.backend, state.length),
      logits,
    });
    // An existing file there is replaced only when it is a conversation file (of any model).
    await this.stateFolder.write(file, parts, { headBytes: CONVERSATION_HEAD_BYTES, accepts: isConversationHead });
    return { bytes: parts.reduce((n, p) => n + p.length, 0), tokens: tokens.length };
  }

  async loadConversation(file: string, name: string): Promise<StateInfo> {
    return this.loadState(name, file);
  }

  async loadState(name: string, source: string | Uint8Array): Promise<StateInfo> {
    this.checkOpen();
    InitialStateRegistry.checkName(name);
    const release = this.states.reserve(name); // a place under maxStates before the file is read
    try {
      const loaded = await readStateSource(source, this.stateFolder, this.backend.info, this.backend);
      this.unloadState(name);
      return this.states.add(name, loaded.state, loaded.source, loaded.logits);
    } finally {
      release();
    }
  }

  /** Requests naming no state start from this state file (in the state folder) from now on: EngineConfig.defaultState. */
  async useDefaultState(file: string): Promise<void> {
    this.checkOpen();
    const loaded = await readStateSource(file, this.stateFolder, this.backend.info, this.backend);
    this.states.setDefault(loaded.state, loaded.source, loaded.logits);
  }

  unloadState(name: string): void {
    let existing: InitialState;
    try {
      existing = this.states.resolve(name);
    } catch {
      return;
    }
    if (existing === this.states.zero) return;
    this.states.remove(name);
    this.scheduler.forgetInitial(existing);
  }

  listStates(): StateInfo[] {
    return this.states.list();
  }

  /** The named states loaded now (host copies), for the engine that replaces this one after a GPU failure. */
  loadedStates(): InitialState[] {
    return this.states.list().map((info) => this.states.resolve(info.name));
  }

  /** Takes over the states a broken predecessor had loaded, so requests naming them keep working. */
  adoptStates(states: readonly InitialState[]): void {
    for (const s of states) if (s.state && !this.listStates().some((l) => l.name === s.name)) this.states.add(s.name, s.state, s.source, s.logits);
  }

  /** Set when the GPU behind this engine failed: the shared registry then builds a new engine. */
  get broken(): string | null {
    return this.brokenReason ?? this.backend.lost ?? null;
  }

  /** Stop the engine. drain: let queued and running requests finish first. */
  async close(opts: { drain?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.scheduler.close(opts);
    this.backend.dispose();
  }

  // ---- helpers -------------------------------------------------------------------------------------

  private runStateTask(initial: InitialState, prompt: number[], signal?: AbortSignal) {
    const task = new StateTask(initial, prompt, signal);
    this.scheduler.submit(task);
    return task.promise;
  }

  /** Prompt rows, with the shared start (sharedPrefix characters) tokenized on its own and marked for the cache. */
  private sharedPromptRows(text: string, sharedPrefix: number | undefined, initial: InitialState): { prompt: number[]; checkpoints: number[] } {
    if (sharedPrefix === undefined || sharedPrefix === null) return { prompt: this.promptRows(text, initial), checkpoints: [] };
    if (!Number.isInteger(sharedPrefix) || sharedPrefix < 0 || sharedPrefix > text.length) {
      throw new RequestError(`sharedPrefix must be an integer in [0, ${text.length}] (characters of the prompt), got ${sharedPrefix}`);
    }
    const head = this.rows(text.slice(0, sharedPrefix), 'prompt');
    const prompt = head.concat(this.rows(text.slice(sharedPrefix), 'prompt'));
    if (prompt.length === 0) return { prompt: this.promptRows(text, initial), checkpoints: [] };
    return { prompt, checkpoints: head.length > 0 ? [head.length] : [] };
  }

  /** Prompt rows; an empty prompt needs an initial state with logits (or `endOfTextIfEmpty`). */
  private promptRows(text: string, initial: InitialState, endOfTextIfEmpty = false): number[] {
    const rows = this.rows(text, 'prompt');
    if (rows.length === 0 && !initial.logits) {
      if (endOfTextIfEmpty) return [this.endOfTextRow()];
      throw new RequestError('prompt is empty; give some text (or start from a saved conversation state)');
    }
    // A state that grows per token (RWKV-7b) holds at most the operator's context limit (maxContext).
    contextRoom(this.backend, initial.state, rows.length, 0);
    return rows;
  }

  private rows(text: string, what: string): number[] {
    let ids: number[];
    try {
      ids = this.tokenizer.encode(text);
    } catch (e) {
      throw new RequestError(`${what} cannot be tokenized: ${(e as Error).message}`);
    }
    return ids.map((id) => {
      const row = this.mapping.worldToRow(id);
      if (row < 0) throw new RequestError(`${what} contains token ${id}, which the model's vocabulary lacks`);
      return row;
    });
  }

  private endOfTextRow(): number {
    const row = this.mapping.worldToRow(END_OF_TEXT);
    if (row < 0) throw new RequestError("the model's vocabulary has no end-of-text token");
    return row;
  }

  private checkOpen(): void {
    if (this.closed) throw new EngineClosedError();
  }
}

/** The value of a maybe-promise, or null as soon as the signal aborts. */
async function untilAborted<T>(value: T | Promise<T>, signal: AbortSignal): Promise<T | null> {
  if (!(value instanceof Promise)) return value;
  if (signal.aborted) return null;
  let onAbort = () => {};
  const aborted = new Promise<null>((resolve) => {
    onAbort = () => resolve(null);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([value, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

export { AbortError };
