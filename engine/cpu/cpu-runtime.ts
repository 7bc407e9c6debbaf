// The CPU backend: the InferenceBackend the WebGPU runtimes implement, computed by WebAssembly SIMD kernels on
// worker threads over one shared memory (weights, slot states, scratch), for every version (its planner lays the
// model out: planRwkv7CpuModel, finchCpuPlanner for RWKV-5.2/6, planRwkv4CpuModel, yielding to the event loop
// between matrices). This side validates and plans each call (same rules and messages as the GPU runtimes), hands
// the plan to the compute thread (cpu-worker.ts) which also reduces 'top' rows; the host's event loop only waits. Calls
// run one at a time in order; state reads and writes are ordered with them as a GPU queue orders them.

import { checkJob } from '../job-checks';
import * as os from 'os';
import * as path from 'path';
import { Worker } from 'worker_threads';
import type { Checkpoint, InferenceBackend, JobResult, LogitAdjust, ModelInfo, OutputMode, SlotJob, StateSnapshot, TopLogits } from '../types';
import { Arena } from './arena';
import { checkLogitAdjust } from './top-logits-cpu';
import { type KernelVariant, kernelModule } from './wasm-kernels';
import { TOP_CAPACITY } from '../rwkv7/top-logits';
import type { CpuBaseLayout, CpuSegment, CpuSubPass } from './cpu-forward-base';
import type { CpuCommonWeights, CpuPrecision } from './cpu-weight-writer';
import { int8ScratchBytes } from './int8-quant';
import { i16ScratchBytes } from './i16-quant';
import type { CpuPassName } from './cpu-passes';
import { DEFAULT_MAX_CONTEXT, MAX_CONTEXT, snapshotRows } from '../state-shape';
import { inPieces, YIELD_FLOATS } from '../yield-chunks';

/** Most floats of one slot's rows (one Float32Array; 4 GiB). */
const MAX_ROW_FLOATS = 2 ** 30;

/** What a version's planner is told: the storage (precision, layers int8 quantises) and the sizes of the runtime's slots and sub-passes. */
export interface CpuPlanOptions {
  precision: CpuPrecision;
  /** int8: layers quantised from the first (0 = all; precision.ts WeightStorage). */
  quantLayers: number;
  slots: number;
  TMAX: number;
  RMAX: number;
}

/** A model laid out for the CPU backend by its version's planner; layout and weights are plain data for the worker. */
export interface CpuModelPlan<L extends CpuBaseLayout = CpuBaseLayout, W extends CpuCommonWeights = CpuCommonWeights> {
  /** Which forward pass the compute thread runs (cpu-passes.ts). */
  pass: CpuPassName;
  layout: L;
  weights: W;
  /** The widest input of any matrix, for the per-thread scratch. */
  widestInput: number;
  /** Copies the weights into the memory once it exists. */
  write(memory: WebAssembly.Memory): void;
}

/** Lays a model out (asynchronously: it yields to the event loop between matrices). */
export type CpuPlanner = (arena: Arena, ck: Checkpoint, info: ModelInfo, opts: CpuPlanOptions) => Promise<CpuModelPlan>;

export interface CpuRuntimeOptions {
  slots: number;
  /** Most tokens in one sub-pass. */
  maxTokens: number;
  /** Most logits rows in one sub-pass. */
  maxRows: number;
  precision: CpuPrecision;
  /** int8: layers quantised from the first (0 or unset = all; precision.ts WeightStorage). */
  quantLayers?: number;
  /** Threads computing (the compute thread and its helpers); default: the machine's available parallelism. */
  threads?: number;
  /** A state that grows (RWKV-7b): most tokens one slot's state may hold (default DEFAULT_MAX_CONTEXT). */
  maxContext?: number;
}

/** Threads the CPU backend uses when not told: every core the process may use. */
export function defaultCpuThreads(): number {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

/** Most tokens in one sub-pass. */
function subPassTokens(opts: CpuRuntimeOptions): number {
  return Math.max(1, opts.maxTokens);
}

/** Most logits rows in one sub-pass: at most its tokens. */
function subPassRows(opts: CpuRuntimeOptions): number {
  return Math.max(1, Math.min(opts.maxRows, subPassTokens(opts)));
}

type Reply = { type: 'ready' } | { type: 'done'; logits: Float32Array; tops: TopLogits[] } | { type: 'rows'; rows: Float32Array } | { type: 'error'; message: string };

export class CpuRuntime implements InferenceBackend {
  readonly slots: number;
  readonly stateSize: number;
  readonly stateRowFloats: number;
  readonly maxStateRows: number;
  readonly topCapacity = TOP_CAPACITY;
  readonly threads: number;
  readonly weightBytes: number;
  readonly memoryBytes: number;
  /** Which build of the kernels runs: plain SIMD, or with relaxed SIMD's fused multiply-add. */
  readonly kernelVariant: KernelVariant;
  private readonly V: number;
  private readonly TMAX: number;
  private readonly RMAX: number;
  private readonly state: Float32Array;
  private readonly worker: Worker;
  private waiting: { resolve: (r: Reply) => void } | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /** Calls queued or running; state writes made while 0 apply at once. */
  private busy = 0;
  private disposed = false;
  private lostReason: string | null = null;
  /** Rows each slot's growing state holds once the calls and state changes made so far have run (0 for a fixed state). */
  private readonly rowCounts: number[];

  private constructor(readonly info: ModelInfo, arena: Arena, plan: CpuModelPlan, opts: CpuRuntimeOptions) {
    this.slots = opts.slots;
    this.threads = opts.threads ?? defaultCpuThreads();
    this.TMAX = subPassTokens(opts);
    this.RMAX = subPassRows(opts);
    const { layout, weights } = plan;
    this.stateSize = layout.stateSize;
    this.stateRowFloats = layout.stateRowFloats;
    this.maxStateRows = this.stateRowFloats > 0 ? (opts.maxContext ?? DEFAULT_MAX_CONTEXT) : 0;
    this.rowCounts = new Array<number>(this.slots).fill(0);
    if (this.maxStateRows * this.stateRowFloats > MAX_ROW_FLOATS)
      throw new RangeError(
        `a context of ${this.maxStateRows} tokens needs ${this.maxStateRows * this.stateRowFloats * 4} bytes per slot (${this.stateRowFloats * 4} per token), ` +
          `more than one slot can hold (${MAX_ROW_FLOATS * 4}); lower maxContext in the engine config`,
      );
    // The rows are taken as contexts fill: a configuration that cannot hold them all would load, then fail (or be
    // killed) mid-generation, so it is refused now.
    const allRows = this.slots * this.maxStateRows * this.stateRowFloats * 4;
    if (allRows > 0 && allRows + arena.bytes > os.totalmem())
      throw new RangeError(
        `${this.slots} slots × a context of ${this.maxStateRows} tokens need ${allRows} bytes (${this.stateRowFloats * 4} per token per slot) ` +
          `besides the model's ${arena.bytes}, more than this machine's memory (${os.totalmem()}); lower maxContext or maxBatch in the engine config`,
      );
    this.weightBytes = weights.bytes;
    this.V = layout.V;
    // f16 panels are widened into the scratch, 32 bytes per input of the widest matrix; int8 and i16 weights:
    // the call's tokens quantized to i16 instead (int8-quant.ts, i16-quant.ts). A model runs several kinds when
    // int8 covers its first layers only: the largest need.
    const scratchNeed = Math.max(
      plan.widestInput * 32,
      weights.hasInt8 ? int8ScratchBytes(this.TMAX, plan.widestInput) : 0,
      weights.hasI16 ? i16ScratchBytes(this.TMAX, plan.widestInput) : 0,
    );
    layout.scratchBytes = Math.ceil(scratchNeed / 64) * 64;
    layout.maxStateRows = this.maxStateRows; // the compute thread's rows grow up to it, never past
    layout.scratch = arena.alloc(this.threads * layout.scratchBytes);
    const kernels = kernelModule();
    this.kernelVariant = kernels.variant;
    const memory = arena.createMemory();
    this.memoryBytes = arena.bytes;
    plan.write(memory);
    this.state = new Float32Array(memory.buffer, layout.state, this.slots * this.stateSize);
    this.worker = new Worker(path.join(__dirname, 'cpu-worker.js'), {
      workerData: { memory, module: kernels.module, pass: plan.pass, layout, weights, threads: this.threads },
    });
    this.worker.on('message', (m: Reply) => this.reply(m));
    this.worker.on('error', (e: Error) => this.fail(`the CPU backend's compute thread failed: ${e.message}`));
    this.worker.on('exit', (code) => {
      if (!this.disposed) this.fail(`the CPU backend's compute thread exited (code ${code})`);
    });
  }

  /** Lays the model out and starts the compute thread; resolves once it is ready. */
  static async create(ck: Checkpoint, info: ModelInfo, opts: CpuRuntimeOptions, planner: CpuPlanner): Promise<CpuRuntime> {
    // The options are checked before the (long) weight layout.
    if (opts.threads !== undefined && !(Number.isInteger(opts.threads) && opts.threads >= 1 && opts.threads <= 1024))
      throw new RangeError(`threads must be an integer in [1, 1024], got ${opts.threads}`);
    if (opts.maxContext !== undefined && !(Number.isInteger(opts.maxContext) && opts.maxContext >= 1 && opts.maxContext <= MAX_CONTEXT))
      throw new RangeError(`maxContext must be an integer in [1, ${MAX_CONTEXT}], got ${opts.maxContext}`);
    const arena = new Arena();
    const plan = await planner(arena, ck, info, {
      precision: opts.precision,
      quantLayers: opts.quantLayers ?? 0,
      slots: opts.slots,
      TMAX: subPassTokens(opts),
      RMAX: subPassRows(opts),
    });
    const rt = new CpuRuntime(info, arena, plan, opts);
    const first = await rt.await();
    if (first.type !== 'ready') {
      rt.dispose();
      throw new Error(first.type === 'error' ? first.message : 'the CPU backend did not start');
    }
    rt.worker.unref();
    return rt;
  }

  get lost(): string | null {
    return this.lostReason;
  }

  private reply(m: Reply) {
    const w = this.waiting;
    this.waiting = null;
    w?.resolve(m);
  }

  private fail(reason: string) {
    this.lostReason ??= reason;
    this.reply({ type: 'error', message: reason });
  }

  private await(): Promise<Reply> {
    if (this.lostReason) return Promise.resolve({ type: 'error', message: this.lostReason });
    return new Promise((resolve) => (this.waiting = { resolve }));
  }

  private checkAlive() {
    if (this.disposed) throw new Error('the RWKV backend was disposed');
    if (this.lostReason) throw new Error(this.lostReason);
  }

  private serialize<T>(fn: () => Promise<T> | T): Promise<T> {
    this.busy++;
    const p = this.queue.then(() => {
      this.checkAlive();
      return fn();
    });
    this.queue = p.catch(() => undefined).finally(() => this.busy--);
    return p;
  }

  // ---- planning (the GPU runtime's rules) -----------------------------------------------------------------

  /**
   * The call's sub-passes; the full logits rows each job gets back (rowsPerJob, from rowBase) and, for output
   * 'top', the index of its reduction (topIndex; -1 for other jobs), which the compute thread makes in place.
   */
  private plan(jobs: SlotJob[]): { passes: CpuSubPass[]; rowsPerJob: number[]; rowBase: number[]; topIndex: number[]; tops: (LogitAdjust | undefined)[] } {
    const seen = new Set<number>();
    const rowsPerJob: number[] = [];
    const topIndex: number[] = [];
    const tops: (LogitAdjust | undefined)[] = [];
    jobs.forEach((j, i) => {
      checkJob(j, i, this.slots, this.V, seen, (a, k) => checkLogitAdjust(a, k, this.V));
      rowsPerJob.push(j.output === 'all' ? j.tokens.length : j.output === 'last' ? 1 : 0);
      topIndex.push(j.output === 'top' ? tops.push(j.adjust) - 1 : -1);
      const held = this.rowCounts[j.slot] + j.tokens.length;
      if (this.stateRowFloats > 0 && held > this.maxStateRows)
        throw new RangeError(
          `slot ${j.slot} would hold ${held} tokens of context (${this.rowCounts[j.slot]} cached + ${j.tokens.length}), ` +
            `more than the context limit of ${this.maxStateRows} (maxContext in the engine config)`,
        );
    });
    const rowBase: number[] = [];
    let acc = 0;
    for (const r of rowsPerJob) {
      rowBase.push(acc);
      acc += r;
    }
    const passes: CpuSubPass[] = [];
    let segs: CpuSegment[] = [];
    let ids: number[] = [];
    let rows = 0;
    const flush = () => {
      if (segs.length) passes.push({ ids: Int32Array.from(ids), segments: segs });
      segs = [];
      ids = [];
      rows = 0;
    };
    jobs.forEach((j, ji) => {
      let pos = 0;
      const n = j.tokens.length;
      while (pos < n) {
        let room = this.TMAX - ids.length;
        if (j.output === 'all') room = Math.min(room, this.RMAX - rows);
        const needsLastRow = j.output === 'last' || j.output === 'top';
        if (room <= 0 || (needsLastRow && pos + room >= n && rows >= this.RMAX)) {
          flush();
          continue;
        }
        const to = Math.min(n, pos + room);
        const out = j.output === 'all' ? 'all' : needsLastRow && to === n ? j.output : 'none';
        const resultRow = j.output === 'top' ? topIndex[ji] : rowBase[ji] + (j.output === 'all' ? pos : 0);
        segs.push({ slot: j.slot, start: ids.length, count: to - pos, out, resultRow });
        for (let t = pos; t < to; t++) ids.push(j.tokens[t]);
        rows += out === 'all' ? to - pos : out === 'none' ? 0 : 1;
        pos = to;
      }
    });
    flush();
    return { passes, rowsPerJob, rowBase, topIndex, tops };
  }

  // ---- InferenceBackend -----------------------------------------------------------------------------------

  run(jobs: SlotJob<Exclude<OutputMode, 'top'>>[]): Promise<(Float32Array | null)[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]> {
    let planned: ReturnType<CpuRuntime['plan']>;
    try {
      this.checkAlive();
      planned = this.plan(jobs);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.stateRowFloats > 0) for (const j of jobs) this.rowCounts[j.slot] += j.tokens.length;
    return this.serialize(async () => {
      const { passes, rowsPerJob, rowBase, topIndex, tops } = planned;
      const total = rowsPerJob.reduce((a, b) => a + b, 0);
      if (passes.length === 0) return jobs.map(() => null);
      this.worker.ref();
      const reply = this.await();
      this.worker.postMessage({ type: 'run', passes, rows: total, tops });
      const m = await reply;
      if (!this.disposed) this.worker.unref();
      if (m.type !== 'done') throw new Error(m.type === 'error' ? m.message : 'unexpected reply from the CPU backend');
      const V = this.V;
      return jobs.map((j, i) => {
        if (topIndex[i] >= 0) return m.tops[topIndex[i]];
        if (rowsPerJob[i] === 0) return null;
        return m.logits.subarray(rowBase[i] * V, (rowBase[i] + rowsPerJob[i]) * V);
      });
    });
  }

  private checkSlot(slot: number) {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots)
      throw new RangeError(`slot ${slot} is out of range 0..${this.slots - 1}`);
  }

  private slotState(slot: number): Float32Array {
    return this.state.subarray(slot * this.stateSize, (slot + 1) * this.stateSize);
  }

  /** Applies a state change now when nothing is queued, else after what is queued. */
  private ordered(apply: () => void) {
    if (this.busy === 0) apply();
    else void this.serialize(apply).catch(() => undefined);
  }

  readState(slot: number, opts?: { fixedOnly?: boolean }): Promise<StateSnapshot> {
    this.checkSlot(slot);
    return this.serialize(async () => {
      if (this.stateRowFloats === 0 || opts?.fixedOnly) return Float32Array.from(this.slotState(slot));
      // The compute thread builds the whole snapshot, the fixed part from the shared memory and then the rows
      // (state-shape.ts), and hands it over: the event loop copies none of it (up to hundreds of MiB).
      // Referenced while the reply is awaited, as for a call: an idle process must not exit under a read.
      this.worker.ref();
      const reply = this.await();
      const fixed = this.slotState(slot);
      this.worker.postMessage({ type: 'rows-read', slot, fixedAt: fixed.byteOffset, fixedFloats: fixed.length });
      const m = await reply;
      if (!this.disposed) this.worker.unref();
      if (m.type !== 'rows') throw new Error(m.type === 'error' ? m.message : 'unexpected reply from the CPU backend');
      return m.rows;
    });
  }

  writeState(slot: number, state: StateSnapshot): void {
    this.checkSlot(slot);
    this.checkAlive();
    if (this.stateRowFloats === 0 && state.length !== this.stateSize)
      throw new RangeError(`state has ${state.length} floats; this model's state has ${this.stateSize}`);
    const rows = snapshotRows(this, state.length);
    const fixed = this.stateRowFloats > 0 ? state.slice(0, this.stateSize) : state.subarray(0, this.stateSize);
    if (this.stateRowFloats > 0) {
      this.rowCounts[slot] = rows;
      // The rows (up to hundreds of MiB) are copied for the compute thread a piece at a time, with event-loop turns
      // between, behind the calls and state changes made so far; the ones made after this queue behind it. The
      // caller leaves the snapshot unchanged meanwhile (InferenceBackend.writeState).
      void this.serialize(async () => {
        const grown = new Float32Array(state.length - this.stateSize);
        await inPieces(grown.length, YIELD_FLOATS, (from, to) => grown.set(state.subarray(this.stateSize + from, this.stateSize + to), from));
        this.checkAlive();
        this.slotState(slot).set(fixed);
        this.worker.postMessage({ type: 'rows-write', slot, rows: grown }, [grown.buffer as ArrayBuffer]);
      }).catch(() => undefined);
    } else if (this.busy === 0) this.slotState(slot).set(fixed);
    else {
      const copy = Float32Array.from(fixed);
      this.ordered(() => this.slotState(slot).set(copy));
    }
  }

  resetState(slot: number): void {
    this.checkSlot(slot);
    this.checkAlive();
    this.rowCounts[slot] = 0;
    this.ordered(() => {
      this.slotState(slot).fill(0);
      if (this.stateRowFloats > 0) this.worker.postMessage({ type: 'rows-reset', slot });
    });
  }

  copyState(fromSlot: number, toSlot: number): void {
    this.checkSlot(fromSlot);
    this.checkSlot(toSlot);
    this.checkAlive();
    if (fromSlot === toSlot) return;
    this.rowCounts[toSlot] = this.rowCounts[fromSlot];
    this.ordered(() => {
      this.slotState(toSlot).set(this.slotState(fromSlot));
      if (this.stateRowFloats > 0) this.worker.postMessage({ type: 'rows-copy', from: fromSlot, to: toSlot });
    });
  }

  /** Bytes the slot's state takes now (its fixed part plus its cached rows). */
  stateBytes(slot: number): number {
    this.checkSlot(slot);
    return 4 * (this.stateSize + this.rowCounts[slot] * this.stateRowFloats);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.reply({ type: 'error', message: 'the RWKV backend was disposed' });
    this.worker.postMessage({ type: 'dispose' });
    void this.worker.terminate();
  }
}
