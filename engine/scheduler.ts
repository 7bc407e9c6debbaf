// Continuous batching over the backend's slots. Each step is ONE backend.run(): one token for
// every slot that is decoding plus prompt chunks of several slots within a token budget (chunkSize
// beside decoding slots; every pending chunk, prefillChunkSize each, when nothing decodes), so a long
// prompt never stalls the slots that are generating. The pacer holds prompts back only for slots
// whose requests came in an earlier step: a burst submitted together prefills at once instead of
// trickling in behind its own first members. Slots free the moment a task ends; further tasks wait in a
// bounded queue. Every failure ends only the task concerned.

import { AbortError, EngineClosedError, QueueFullError } from './errors';
import type { InitialState } from './initial-states';
import type { Feed, SlotTask } from './slot-task';
import { PacedStep, PacingState, PrefillPacer } from './prefill-pacer';
import { SlotPool, type SlotChoice, type SlotRecord } from './slot-pool';
import type { StepRecord } from './step-trace';
import type { DrawJob, DrawParams, InferenceBackend, JobResult, LogitAdjust, OutputMode, SlotJob } from './types';

export interface SchedulerOptions {
  /** Tokens per prefill chunk while other slots decode. */
  chunkSize: number;
  /** Tokens per prefill chunk while no slot decodes (default and minimum: chunkSize). */
  prefillChunkSize?: number;
  /** Tasks allowed to wait for a slot. */
  maxQueue: number;
  /**
   * Prompts at least this long are cached when their prefill ends (cachePrompt 'auto'), when they computed at
   * least this many tokens beyond the cached prefix or retained state they resumed from.
   */
  cacheMinTokens: number;
  /** Share of their speed decoding requests keep while a prompt prefills (default 0.75). */
  decodeKeep?: number;
  /**
   * Shared-prefix reuse (default on): cacheable prompts leave checkpoints in the prefix cache at every prefill
   * chunk boundary and at caller-marked boundaries, and a prompt that shares a prefix with one prefilling now
   * waits for that prefix's checkpoint instead of computing it again. Off: only whole prompts are cached.
   */
  prefixReuse?: boolean;
  /**
   * Most decode steps one backend call may run back to back with every token drawn on the GPU (runDraws), when every
   * running task can be drawn for there and no prompt is waiting for a slot or a chunk; 0 or absent: never. More steps
   * take the host's round trip and sampling out of more steps. The next call is queued behind the one being read
   * (continueDraws). A request that arrives waits for the calls in flight; a task that ends inside a call leaves its
   * slot holding the tokens drawn after its end, or cleared where a call queued behind fed it on.
   */
  drawSteps?: number;
}

export interface SchedulerStats {
  steps: number;
  /** Tokens fed one at a time (decoding). */
  decodeTokens: number;
  /** Tokens fed in chunks (prompts, scored continuations). */
  chunkTokens: number;
  cachedPromptTokens: number;
  /** Prefill chunk checkpoints put into the prefix cache. */
  checkpoints: number;
  /** Tasks admitted after waiting for a running prompt's checkpoint of their shared prefix. */
  sharedWaits: number;
  backendMs: number;
}

interface Running {
  task: SlotTask;
  slot: SlotRecord;
  seq: number;
  /** Steps finished before the task was submitted: tasks with the same count arrived together. */
  arrival: number;
  phase: 'prefill' | 'run';
  /** Prompt tokens the slot held before the prefill feed (cached prefix or retained state). */
  start: number;
  /** Prompt positions (ascending, > start) where a prefill chunk must end and the state be cached. */
  marks: number[];
  /** Checkpoint read-backs of this prompt still in flight. */
  pendingReads: number;
  feed: readonly number[];
  fed: number;
  output: OutputMode;
  adjust: LogitAdjust | undefined;
  /** The task wants the slot's state after this feed. */
  readState?: boolean;
  /** Logits of earlier chunks of an 'all' feed. */
  collected: Float32Array[];
}

interface PlannedJob {
  run: Running;
  tokens: number[];
  output: OutputMode;
  adjust?: LogitAdjust;
}

export class Scheduler {
  readonly pool: SlotPool;
  readonly stats: SchedulerStats = { steps: 0, decodeTokens: 0, chunkTokens: 0, cachedPromptTokens: 0, checkpoints: 0, sharedWaits: 0, backendMs: 0 };
  private readonly queue: SlotTask[] = [];
  private readonly abortListeners = new Map<SlotTask, () => void>();
  private readonly running = new Map<number, Running>();
  private seq = 0;
  /**
   * Steps finished so far: arrival times in steps (see plan's pacing rule). Finished rather than planned, so that
   * tasks submitted together still count as together when the loop plans its first step between their submissions.
   */
  private finished = 0;
  /** Each queued task's arrival: steps finished before it was submitted. */
  private readonly arrivals = new WeakMap<SlotTask, number>();
  private looping = false;
  private loopDone: Promise<void> = Promise.resolve();
  /** 'drain': finish what is queued and running; 'now': stop after the current step. */
  private closing: 'drain' | 'now' | null = null;
  /** Set once the backend broke: every task ended with it, and new ones are refused with its message. */
  private failure: Error | null = null;

  private readonly pacer: PrefillPacer;
  /** Chunk size while no slot decodes: nothing waits on the step, and larger chunks use the GPU better. */
  private readonly aloneChunkSize: number;
  private readonly reuse: boolean;
  /** Queued tasks waiting for a running prompt's checkpoint of the prefix they share (rechecked in O(1) a step). */
  private readonly waiting = new Map<SlotTask, { run: Running; target: number }>();
  /** Queued tasks that have waited for a shared prefix (counted once when admitted). */
  private readonly waited = new Set<SlotTask>();
  /**
   * Cached states written into a slot since the last step, by entry: a later task resuming from the same entry
   * (a burst's items waiting for one shared checkpoint) copies that slot's state on the GPU instead of uploading
   * the same megabytes again. Emptied before every step, which changes the slots' states.
   */
  private readonly loadedSinceStep = new Map<Float32Array, number>();
  /** Told about every finished step (benchmarks' step traces). */
  private readonly stepListeners = new Set<(step: StepRecord) => void>();

  constructor(
    private readonly backend: InferenceBackend,
    readonly options: SchedulerOptions,
  ) {
    if (!Number.isInteger(options.chunkSize) || options.chunkSize < 1) throw new RangeError(`chunkSize must be an integer >= 1, got ${options.chunkSize}`);
    const alone = options.prefillChunkSize;
    if (alone !== undefined && (!Number.isInteger(alone) || alone < 1)) throw new RangeError(`prefillChunkSize must be an integer >= 1, got ${alone}`);
    if (!Number.isInteger(options.maxQueue) || options.maxQueue < 0) throw new RangeError(`maxQueue must be an integer >= 0, got ${options.maxQueue}`);
    this.pool = new SlotPool(backend.slots);
    this.pacer = new PrefillPacer(options.decodeKeep ?? 0.75);
    this.aloneChunkSize = Math.max(options.chunkSize, alone ?? 0);
    this.reuse = options.prefixReuse ?? true;
  }

  /** How prefill chunks are paced against decoding now (see PrefillPacer). */
  get pacing(): PacingState {
    return this.pacer.state;
  }

  /** Call `listener` after every step with its shape and backend time; returns the call that stops it. */
  onStep(listener: (step: StepRecord) => void): () => void {
    this.stepListeners.add(listener);
    return () => this.stepListeners.delete(listener);
  }

  get queued(): number {
    return this.queue.length;
  }

  get active(): number {
    return this.running.size;
  }

  /** Queue a task. Throws QueueFullError / EngineClosedError synchronously; everything later goes to the task's callbacks. */
  submit(task: SlotTask): void {
    if (this.failure) throw new EngineClosedError(this.failure.message);
    if (this.closing) throw new EngineClosedError();
    if (task.signal?.aborted) throw new AbortError();
    const free = this.pool.idleCount;
    if (this.queue.length >= this.options.maxQueue + free) throw new QueueFullError(this.options.maxQueue);
    this.queue.push(task);
    this.arrivals.set(task, this.finished);
    if (task.signal) {
      const listener = () => {
        const at = this.queue.indexOf(task);
        if (at < 0) return;
        this.queue.splice(at, 1);
        this.waited.delete(task);
        this.waiting.delete(task);
        this.abortListeners.delete(task);
        Scheduler.safely(() => task.onAbort());
      };
      task.signal.addEventListener('abort', listener, { once: true });
      this.abortListeners.set(task, listener);
    }
    const waiting = this.queue.length - free;
    if (waiting > 0) Scheduler.safely(() => task.onQueued?.(waiting));
    this.kick();
  }

  /** Forget slots retaining an initial state that was unloaded. */
  forgetInitial(initial: InitialState): void {
    this.pool.forget(initial);
  }

  /**
   * Stop. With drain, queued and running tasks finish first; without, they end with
   * EngineClosedError after the current step.
   */
  async close(opts: { drain?: boolean } = {}): Promise<void> {
    if (this.closing !== 'now') this.closing = opts.drain ? 'drain' : 'now';
    while (this.looping) await this.loopDone;
    if (opts.drain) return;
    const err = new EngineClosedError('engine closed before the request finished');
    for (const task of this.queue.splice(0)) this.detach(task), Scheduler.safely(() => task.onError(err));
    for (const run of [...this.running.values()]) this.end(run, () => run.task.onError(err));
  }

  /**
   * The backend can no longer run (GPU device lost, uncaptured WebGPU error): end every queued and running
   * task with `error` now, without waiting for the step in flight, and refuse new tasks.
   */
  fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.closing = 'now';
    for (const task of this.queue.splice(0)) this.detach(task), Scheduler.safely(() => task.onError(error));
    for (const run of [...this.running.values()]) this.end(run, () => run.task.onError(error));
  }

  private kick(): void {
    if (this.looping) return;
    this.looping = true;
    this.loopDone = this.loop();
  }

  private async loop(): Promise<void> {
    // A decoding step's cost for the pacer is its whole period, up to the next step's start: the host work
    // between steps (admission, planning, consumers) is part of what decoding requests wait for.
    let last: (Omit<PacedStep, 'ms'> & { started: number }) | null = null;
    for (;;) {
      if (this.closing === 'now') {
        this.looping = false;
        return;
      }
      await this.admit();
      this.reapAborted();
      // Accounted before planning, so the decision whether this step carries a chunk sees the step before.
      const started = performance.now();
      if (last) this.pacer.record({ ...last, ms: started - last.started });
      last = null;
      const draws = this.planDraws();
      if (draws) {
        this.loadedSinceStep.clear();
        await this.drawSteps(draws.runs, draws.params, draws.steps, started);
        this.finished++;
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const { jobs: plan, promptWaiting } = this.plan();
      if (plan.length === 0) {
        if (this.queue.length === 0 && this.running.size === 0) {
          this.looping = false;
          return;
        }
        // Only possible when admission is blocked by an error path; yield and retry.
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const decodeRows = plan.reduce((n, p) => n + (p.tokens.length === 1 ? 1 : 0), 0);
      const chunkTokens = plan.reduce((n, p) => n + (p.tokens.length > 1 ? p.tokens.length : 0), 0);
      last = decodeRows > 0 ? { started, decodeRows, chunkTokens, promptWaiting } : null;
      this.loadedSinceStep.clear();
      await this.step(plan, started, decodeRows, chunkTokens);
      this.finished++;
      // Let request consumers and new submissions in between steps.
      await new Promise((r) => setImmediate(r));
    }
  }

  private async admit(): Promise<void> {
    for (let i = 0; i < this.queue.length; ) {
      if (this.pool.idleCount === 0) return;
      const task = this.queue[i];
      // A task whose shared prefix a running prompt is computing now waits for that checkpoint (tasks behind it go on).
      if (this.awaitsSharedPrefix(task)) {
        i++;
        continue;
      }
      const choice = this.pool.choose(task.initial, task.prompt);
      if (!choice) return;
      this.queue.splice(i, 1);
      if (this.waited.has(task)) this.stats.sharedWaits++;
      this.detach(task);
      this.pool.take(choice.slot);
      try {
        await this.place(task, choice);
      } catch (error) {
        this.forgetLoaded(choice.slot.index);
        this.pool.clear(choice.slot);
        this.pool.release(choice.slot);
        this.running.delete(choice.slot.index);
        Scheduler.safely(() => task.onError(Scheduler.asError(error)));
      }
    }
  }

  /**
   * In-flight de-duplication (ai00 shares one future per prefix): when a running prompt of the same initial
   * state has yet to reach (or to cache) a prefix it shares with `task`, longer than what the cache gives
   * `task` now, ask it for a checkpoint there and let `task` wait. A leader that ends early only lets it go.
   */
  private awaitsSharedPrefix(task: SlotTask): boolean {
    const held = this.waiting.get(task);
    if (held) {
      const { run, target } = held;
      if (this.running.get(run.slot.index) === run && (Scheduler.promptAt(run) < target || run.pendingReads > 0)) return true;
      this.waiting.delete(task); // reached and cached, or its leader ended: look again (another may share more)
    }
    const leader = this.findLeader(task);
    if (!leader) return false;
    this.waiting.set(task, leader);
    this.waited.add(task);
    return true;
  }

  /** The running prompt that is about to compute a prefix `task` shares, and where that prefix ends. */
  private findLeader(task: SlotTask): { run: Running; target: number } | null {
    if (!this.reuse || (task.cachePrompt ?? 'auto') === 'never' || task.signal?.aborted) return null;
    const cache = task.initial.cache;
    // A cache too small for one state could never hand the prefix over.
    if (cache.maxBytes < this.backend.stateSize * 4) return null;
    const prompt = task.prompt;
    const cached = cache.peek(prompt);
    let best: { run: Running; target: number } | null = null;
    for (const run of this.running.values()) {
      if (run.task.initial !== task.initial || !this.cacheable(run.task)) continue;
      if (run.phase !== 'prefill' && run.pendingReads === 0) continue; // past its prompt, with everything cached
      const other = run.task.prompt;
      let shared = 0;
      const limit = Math.min(prompt.length, other.length);
      while (shared < limit && prompt[shared] === other[shared]) shared++;
      // An entry at the very end of `task`'s prompt must carry logits; one token short of it serves without.
      const target = Math.min(shared, prompt.length - 1);
      if (target < this.options.cacheMinTokens || target <= cached || target <= run.start || target <= (best?.target ?? 0)) continue;
      // Already past it: only a read-back still in flight can bring it (a chunk in flight when `task` came did not stop there).
      if (Scheduler.promptAt(run) >= target && run.pendingReads === 0) continue;
      best = { run, target };
    }
    if (best && Scheduler.promptAt(best.run) < best.target && !best.run.marks.includes(best.target)) {
      best.run.marks = [...best.run.marks, best.target].sort((a, b) => a - b);
    }
    return best;
  }

  /** Prompt tokens in the run's slot: all of them once its prefill ended (its feed is then generated tokens). */
  private static promptAt(run: Running): number {
    return run.phase === 'prefill' ? run.start + run.fed : run.task.prompt.length;
  }

  private cacheable(task: SlotTask): boolean {
    const policy = task.cachePrompt ?? 'auto';
    return policy === 'always' || (policy === 'auto' && task.prompt.length >= this.options.cacheMinTokens);
  }

  /** Put the task's starting state into the slot: retained tokens, a cached prefix, or its initial state. */
  private async place(task: SlotTask, { slot, continueLength }: SlotChoice): Promise<void> {
    const prompt = task.prompt;
    let start = continueLength;
    let logits: Float32Array | null = continueLength > 0 && continueLength === prompt.length ? slot.lastLogits : null;
    const hit = task.initial.cache.lookup(prompt);
    // Whatever this slot held is about to change: it can no longer stand in for a cache entry.
    this.forgetLoaded(slot.index);
    if (hit && hit.length > start) {
      if (start === 0) await this.saveRetained(slot);
      const twin = this.loadedSinceStep.get(hit.state);
      if (twin !== undefined) this.backend.copyState(twin, slot.index);
      else this.backend.writeState(slot.index, hit.state), this.loadedSinceStep.set(hit.state, slot.index);
      start = hit.length;
      logits = hit.logits;
      slot.retained = prompt.slice(0, start);
      slot.lastLogits = hit.logits;
    } else if (start === 0) {
      await this.saveRetained(slot);
      if (task.initial.state) this.backend.writeState(slot.index, task.initial.state);
      else this.backend.resetState(slot.index);
      slot.retained = [];
      slot.lastLogits = task.initial.logits;
      logits = task.initial.logits;
    } else {
      slot.retained.length = start;
    }
    slot.initial = task.initial;
    this.stats.cachedPromptTokens += start;
    const marks = this.reuse ? [...new Set(task.checkpoints ?? [])].filter((m) => Number.isInteger(m) && m > start && m < prompt.length).sort((a, b) => a - b) : [];
    const arrival = this.arrivals.get(task) ?? this.finished;
    const run: Running = { task, slot, seq: this.seq++, arrival, phase: 'prefill', start, marks, pendingReads: 0, feed: prompt.slice(start), fed: 0, output: 'last', adjust: undefined, collected: [] };
    this.running.set(slot.index, run);
    task.onStart?.({ slot: slot.index, promptTokens: prompt.length, cachedTokens: start });
    if (run.feed.length === 0) {
      if (!logits) throw new Error('prompt is empty and the initial state has no logits to continue from');
      await this.finishPrefill(run, logits);
    }
  }

  private forgetLoaded(slot: number): void {
    for (const [state, at] of this.loadedSinceStep) if (at === slot) this.loadedSinceStep.delete(state);
  }

  /** Whether the slot's state, as it will be read back, fits `cache` at all (a growing state weighs its rows). */
  private fitsCache(cache: { maxBytes: number }, slot: number): boolean {
    return cache.maxBytes >= (this.backend.stateBytes?.(slot) ?? 4 * this.backend.stateSize);
  }

  /** Before a slot's retained state is overwritten, keep it in the prefix cache if worthwhile. */
  private async saveRetained(slot: SlotRecord): Promise<void> {
    const initial = slot.initial;
    if (!initial || slot.retained.length < this.options.cacheMinTokens) return;
    if (initial.cache.has(slot.retained) || !this.fitsCache(initial.cache, slot.index)) return;
    const state = await this.backend.readState(slot.index);
    initial.cache.insert(slot.retained.slice(), state, slot.lastLogits);
  }

  private reapAborted(): void {
    for (const run of [...this.running.values()]) {
      if (run.task.signal?.aborted) this.end(run, () => run.task.onAbort());
    }
  }

  /** This step's jobs, and whether a prompt was waiting for chunks (the pacer tells such steps apart). */
  private plan(): { jobs: PlannedJob[]; promptWaiting: boolean } {
    const single: PlannedJob[] = [];
    const chunked: Running[] = [];
    // The earliest arrival among the decoding slots' requests: prompts that came after it are paced.
    let firstDecoding = Infinity;
    for (const run of this.running.values()) {
      const left = run.feed.length - run.fed;
      if (left === 1) single.push({ run, tokens: [run.feed[run.fed]], output: run.output, adjust: run.adjust });
      else if (left > 1) chunked.push(run);
      if (left === 1 && run.phase === 'run') firstDecoding = Math.min(firstDecoding, run.arrival);
    }
    chunked.sort((a, b) => a.seq - b.seq);
    // With slots decoding, at most one chunk's worth of prompt tokens a step (short prompts share it; requests
    // arriving one by one over HTTP would otherwise take a step each). The pacer protects decoding slots from
    // prompts that came after them, in a later step (whether or not those slots decoded yet: first come, first
    // served). Prompts that came together with every decoding slot's request (a flow's items, submitted at once,
    // whose first members decode already) are not held back: the slots they would protect are their own burst's,
    // and every step they wait is a step more of decoding for the whole burst.
    const promptWaiting = chunked.length > 0;
    let take: Running[] = chunked;
    if (single.length > 0 && promptWaiting) {
      const early = chunked.filter((run) => run.arrival <= firstDecoding);
      const paced = early.length < chunked.length;
      const pacedAllowed = paced && this.pacer.chunkAllowed();
      take = pacedAllowed ? chunked : early;
      // The pacer counts only chunks it allowed: its no-starvation interval is about the prompts it holds.
      this.pacer.stepPlanned(pacedAllowed);
    } else if (single.length > 0) this.pacer.stepPlanned(false);
    const chunkSize = single.length === 0 ? this.aloneChunkSize : this.options.chunkSize;
    let budget = single.length === 0 ? Infinity : this.options.chunkSize;
    const jobs = single;
    for (const run of take) {
      if (budget <= 0) break;
      let n = Math.min(chunkSize, run.feed.length - run.fed, budget);
      // A prefill chunk ends at the next marked boundary, so the state there can be kept.
      if (run.phase === 'prefill') {
        const at = run.start + run.fed;
        const mark = run.marks.find((m) => m > at);
        if (mark !== undefined) n = Math.min(n, mark - at);
      }
      budget -= n;
      const last = run.fed + n === run.feed.length;
      const output: OutputMode = run.output === 'all' ? 'all' : last ? run.output : 'none';
      jobs.push({ run, tokens: run.feed.slice(run.fed, run.fed + n) as number[], output, adjust: last ? run.adjust : undefined });
    }
    return { jobs, promptWaiting };
  }

  private async step(plan: PlannedJob[], started: number, decodeRows: number, chunkTokens: number): Promise<void> {
    const jobs: SlotJob[] = plan.map((p) => ({ slot: p.run.slot.index, tokens: p.tokens, output: p.output, adjust: p.adjust }));
    const t0 = performance.now();
    let results: JobResult[];
    try {
      results = await this.backend.run(jobs);
      if (results.length !== jobs.length) throw new Error(`backend returned ${results.length} results for ${jobs.length} jobs`);
    } catch (error) {
      // fail() already ended every task of this step.
      if (this.failure) return;
      // The batch cannot be attributed to one request and the slots' states are unknown now.
      this.failRuns(plan.map((p) => p.run), this.describe(error));
      return;
    } finally {
      const backendMs = performance.now() - t0;
      this.noteStep(backendMs, 1, () => ({ startedMs: started, backendMs, decodeRows, chunkJobs: plan.length - decodeRows, chunkTokens }));
    }
    if (this.failure) return; // the backend broke while this step ran: its tasks have ended, its results are void
    const vocab = this.backend.info.vocabSize;
    for (let i = 0; i < plan.length; i++) {
      const { run, tokens, output } = plan[i];
      const result = results[i];
      const slot = run.slot;
      for (const t of tokens) slot.retained.push(t);
      run.fed += tokens.length;
      if (run.phase === 'run' && run.feed.length === 1) this.stats.decodeTokens++;
      else this.stats.chunkTokens += tokens.length;
      // A 'top' result is not a logits row: nothing a continuing request could start from.
      const logits = result instanceof Float32Array ? result : null;
      if (!logits) slot.lastLogits = null;
      else slot.lastLogits = output === 'all' ? logits.slice(logits.length - vocab) : logits;
      if (output === 'all' && logits) run.collected.push(logits);
      if (run.phase === 'prefill') Scheduler.safely(() => run.task.onPrefillProgress?.(run.fed, run.feed.length));
      if (run.fed < run.feed.length) {
        if (run.phase === 'prefill') this.checkpoint(run);
        continue;
      }
      try {
        const fed = run.output === 'all' ? Scheduler.concat(run.collected) : result;
        run.collected = [];
        if (run.phase === 'prefill') {
          if (!(fed instanceof Float32Array)) throw new Error('backend returned no logits for the end of the prompt');
          await this.finishPrefill(run, fed);
        } else {
          const state = run.readState ? await this.backend.readState(slot.index, { fixedOnly: run.task.fixedStateOnly }) : undefined;
          this.apply(run, run.task.onFed(fed, state));
        }
      } catch (error) {
        this.end(run, () => run.task.onError(Scheduler.asError(error)));
      }
    }
  }

  /**
   * A draw call instead of a step (runDraws): when every running task decodes one token a step with output 'top' and
   * can be drawn for on the GPU, no prompt waits for a free slot, and nothing else is asked of the slots (state reads,
   * aborts). Its steps: the operator's drawSteps, at most what any task may still take.
   */
  private planDraws(): { runs: Running[]; params: DrawParams[]; steps: number } | null {
    const most = Math.min(this.options.drawSteps ?? 0, this.backend.maxDrawSteps ?? 0);
    if (!(most >= 1) || !this.backend.runDraws || this.running.size === 0) return null;
    if (this.queue.length > 0 && this.pool.idleCount > 0) return null;
    const runs: Running[] = [];
    const params: DrawParams[] = [];
    let steps = most;
    for (const run of this.running.values()) {
      const t = run.task;
      if (run.phase !== 'run' || run.feed.length - run.fed !== 1 || run.output !== 'top' || run.readState || t.signal?.aborted) return null;
      if (!t.drawParams || !t.drawBudget || !t.takeUniforms || !t.onDrawn) return null;
      const p = t.drawParams();
      if (!p) return null;
      runs.push(run);
      params.push(p);
      steps = Math.min(steps, t.drawBudget());
    }
    return steps >= 1 ? { runs, params, steps } : null;
  }

  /**
   * Draw calls of `steps` steps for `runs`: the first from the host's state of each task, then, where the backend can
   * continue a call before it is read back, one more call kept queued behind the one being read, so the GPU runs the
   * next steps while the host takes these. Continuing stops once a task ends, a request waits for a free slot, a task
   * could not take the queued tokens within its budget, or the call's room runs out; then the queued call is read and
   * the scheduler's loop goes on. Each slot is fed its pending token and every row drawn before a call's last, which
   * its retained tokens record; a task that ended while a call behind it was queued leaves its slot cleared, since
   * that call feeds it on.
   */
  private async drawSteps(runs: Running[], params: DrawParams[], steps: number, started: number): Promise<void> {
    const backend = this.backend;
    const n = runs.length;
    const jobs: DrawJob[] = runs.map((run, i) => ({ slot: run.slot.index, token: run.feed[run.fed], draw: params[i], uniforms: run.task.takeUniforms!(steps) }));
    const queued: { steps: number; rows: Promise<Int32Array> }[] = [{ steps, rows: backend.runDraws!(jobs, steps) }];
    // The token each slot is fed first by the next call read: the job's, then the last row of the call before.
    const feeds = jobs.map((j) => j.token);
    let room = backend.continueDraws ? (backend.drawContinuationSteps ?? 0) : 0;
    let issued = steps;
    let since = performance.now();
    while (queued.length > 0) {
      if (queued.length === 1 && room >= steps && this.mayContinue(runs, issued + steps)) {
        const uniforms = runs.map((run) => run.task.takeUniforms!(steps));
        queued.push({ steps, rows: backend.continueDraws!(uniforms, steps) });
        issued += steps;
        room -= steps;
      }
      const call = queued.shift()!;
      let rows: Int32Array;
      try {
        rows = await call.rows;
        if (rows.length !== call.steps * n) throw new Error(`backend drew ${rows.length} rows for ${n} jobs of ${call.steps} steps`);
      } catch (error) {
        for (const behind of queued.splice(0)) behind.rows.catch(() => undefined);
        if (this.failure) return;
        this.failRuns(runs, this.describe(error));
        return;
      } finally {
        // Calls overlap: each is charged the time from the later of its own start and the read before it.
        const now = performance.now();
        const backendMs = now - since;
        since = now;
        this.noteStep(backendMs, call.steps, () => ({ startedMs: started, backendMs, decodeRows: n, chunkJobs: 0, chunkTokens: 0, drawSteps: call.steps }));
      }
      if (this.failure) return;
      issued -= call.steps;
      runs.forEach((run, i) => {
        const drawn = new Int32Array(call.steps);
        for (let s = 0; s < call.steps; s++) drawn[s] = rows[s * n + i];
        const slot = run.slot;
        const ongoing = this.running.get(slot.index) === run;
        // Fed this call: its first token and every row drawn before its last.
        if (ongoing) {
          slot.retained.push(feeds[i]);
          for (let s = 0; s < call.steps - 1; s++) slot.retained.push(drawn[s]);
          slot.lastLogits = null;
        }
        feeds[i] = drawn[call.steps - 1];
        this.stats.decodeTokens += call.steps;
        if (!ongoing) return; // ended in an earlier call; its slot was cleared then
        run.fed = run.feed.length;
        // A row that allowed nothing was not fed on: the slot's state no longer follows its retained tokens.
        if (drawn.includes(-1)) this.pool.clear(slot);
        try {
          this.apply(run, run.task.onDrawn!(drawn));
        } catch (error) {
          this.end(run, () => run.task.onError(Scheduler.asError(error)));
        }
        // The call queued behind feeds this slot on: what it retains is no longer its state.
        if (this.running.get(slot.index) !== run && queued.length > 0) this.pool.clear(slot);
      });
      started = performance.now();
    }
  }

  /**
   * Whether a draw call may be queued behind the one in flight: every task still running and able to take `tokens`
   * more, none cancelled, no request waiting for a free slot, the engine neither closing nor broken.
   */
  private mayContinue(runs: Running[], tokens: number): boolean {
    if (this.closing || this.failure) return false;
    if (this.queue.length > 0 && this.pool.idleCount > 0) return false;
    for (const run of runs) {
      if (this.running.get(run.slot.index) !== run || run.task.signal?.aborted) return false;
      if (run.task.drawBudget!() < tokens) return false;
    }
    return true;
  }

  /** Counts a finished step, or a draw call of `steps` steps, and tells the step listeners (the record made only for them). */
  private noteStep(backendMs: number, steps: number, record: () => StepRecord): void {
    this.stats.backendMs += backendMs;
    this.stats.steps += steps;
    if (this.stepListeners.size === 0) return;
    const r = record();
    for (const listener of this.stepListeners) Scheduler.safely(() => listener(r));
  }

  /**
   * A backend call failed for these runs: it cannot be attributed to one request, and their slots' states are unknown
   * now. Each still running ends with `err`.
   */
  private failRuns(runs: Running[], err: Error): void {
    for (const run of runs) {
      this.pool.clear(run.slot);
      Scheduler.safely(() => this.backend.resetState(run.slot.index));
      if (this.running.get(run.slot.index) === run) this.end(run, () => run.task.onError(err));
    }
  }

  /**
   * Mid-prefill: keep the state after the prompt's first tokens in the prefix cache (every chunk boundary of a
   * cacheable prompt, and every marked boundary). Read back like finishPrefill's entry, without holding up the
   * step; entries without logits serve only prompts that go on beyond them.
   */
  private checkpoint(run: Running): void {
    if (!this.reuse) return;
    const at = run.start + run.fed;
    const marked = run.marks.includes(at);
    if (marked) run.marks = run.marks.filter((m) => m > at);
    if (!marked && (!this.cacheable(run.task) || at < this.options.cacheMinTokens)) return;
    if ((run.task.cachePrompt ?? 'auto') === 'never') return;
    const cache = run.task.initial.cache;
    const prefix = run.task.prompt.slice(0, at);
    if (cache.has(prefix) || !this.fitsCache(cache, run.slot.index)) return;
    run.pendingReads++;
    this.stats.checkpoints++;
    this.backend
      .readState(run.slot.index)
      .then(
        // Chunk-boundary checkpoints are speculative: until a prompt uses one, the cache evicts them before any
        // entry that was used or asked for (whole prompts, marked boundaries).
        (state) => cache.insert(prefix, state, null, { speculative: !marked }),
        () => {}, // a failed read only loses a checkpoint; the backend reports its failure on the next step
      )
      .finally(() => run.pendingReads--);
  }

  private async finishPrefill(run: Running, logits: Float32Array): Promise<void> {
    const { task, slot } = run;
    const policy = task.cachePrompt ?? 'auto';
    const min = this.options.cacheMinTokens;
    // 'auto' caches a prompt that saves at least cacheMinTokens of prefill over where it resumed from, or that a
    // queued prompt waits for. A flow's items, resumed from their shared instruction, would otherwise each read
    // back a state no later prompt uses (64 of 13 MB for the 1.5B, a GPU round trip each, between steps) and fill
    // the cache with them, pushing out entries that serve.
    const worthKeeping = task.prompt.length >= min && (task.prompt.length - run.start >= min || this.awaited(run, task.prompt.length));
    const wantCache =
      policy !== 'never' && task.prompt.length > 0 && (policy === 'always' || worthKeeping) && !task.initial.cache.has(task.prompt, true) &&
      this.fitsCache(task.initial.cache, slot.index);
    let state: Float32Array | null = null;
    // A state the cache keeps is whole; one only the task looks at may skip a growing state's rows.
    if (task.wantsState) state = await this.backend.readState(slot.index, { fixedOnly: task.fixedStateOnly && !wantCache });
    if (wantCache && state) task.initial.cache.insert(task.prompt.slice(), state, logits);
    else if (wantCache) {
      // Read back without holding up the decoding slots (on the H200 the 13 MB read of a 1.5B state stalled
      // them for tens of ms). Backend calls run in order, so this read, queued before the slot's next step,
      // sees the state the prompt left.
      const cache = task.initial.cache;
      const prompt = task.prompt.slice();
      run.pendingReads++; // prompts waiting for this prefix wait for the read too
      this.backend
        .readState(slot.index)
        .then(
          (read) => cache.insert(prompt, read, logits),
          () => {}, // a failed read only loses a cache entry; the backend reports its failure on the next step
        )
        .finally(() => run.pendingReads--);
    }
    run.phase = 'run';
    this.apply(run, task.onPrefilled(logits, task.wantsState ? state : null));
  }

  /** Whether a queued task waits for `run`'s prompt up to `length`. */
  private awaited(run: Running, length: number): boolean {
    for (const w of this.waiting.values()) if (w.run === run && w.target >= length) return true;
    return false;
  }

  private apply(run: Running, next: Feed | null): void {
    if (next === null) {
      this.end(run, () => {});
      return;
    }
    if (!next.tokens || next.tokens.length === 0) throw new Error('a task fed no tokens');
    if (next.output === 'top' && !(this.backend.topCapacity! > 0)) throw new Error("the backend has no 'top' output");
    run.feed = next.tokens;
    run.fed = 0;
    run.output = next.output;
    run.adjust = next.adjust;
    run.readState = next.readState;
    run.collected = [];
  }

  /** Free the task's slot and tell it why it ended. */
  private end(run: Running, notify: () => void): void {
    if (this.running.get(run.slot.index) === run) this.running.delete(run.slot.index);
    // An idle slot keeps its last logits for a continuing request; own them so they don't pin a step's buffer.
    const last = run.slot.lastLogits;
    if (last && last.byteLength !== last.buffer.byteLength) run.slot.lastLogits = last.slice();
    this.pool.release(run.slot);
    Scheduler.safely(notify);
  }

  private detach(task: SlotTask): void {
    this.waited.delete(task);
    this.waiting.delete(task);
    const listener = this.abortListeners.get(task);
    if (listener) task.signal?.removeEventListener('abort', listener);
    this.abortListeners.delete(task);
  }

  private static concat(parts: Float32Array[]): Float32Array | null {
    if (parts.length === 0) return null;
    if (parts.length === 1) return parts[0];
    const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) out.set(p, at), (at += p.length);
    return out;
  }

  /** A failed backend call as the tasks see it: the backend's own reason when it broke, never an empty message. */
  private describe(e: unknown): Error {
    const broken = this.backend.lost;
    if (broken) return new Error(broken, { cause: e });
    const err = Scheduler.asError(e);
    return err.message.trim() ? err : new Error(`the backend call failed without a message (${err.name})`, { cause: e });
  }

  private static asError(e: unknown): Error {
    return e instanceof Error ? e : new Error(String(e));
  }

  /** Task callbacks must never break the loop. */
  private static safely(fn: () => void): void {
    try {
      fn();
    } catch {
      // A task's own notification failed; it has already ended.
    }
  }
}
